"""Fit the first stage's calibration (``memoryplatform.relevance``) for the configured embedder.

    env -u DATABASE_URL .venv/bin/python -m bench.calibrate [--data bench/calibration/user_facts.json]

Each invented user of the data file gets its facts as memories (through the services, in a fresh database as
``bench.recall_quality`` makes one), with vectors; with ``--store-sizes``, again split into smaller stores
(each a user of its own). Every question is then asked of each store of its user in hybrid mode with no
threshold, and each fact of the store gives one example: its features (the cosine similarity and BM25 the
platform computed) and whether the question names it as relevant. Three logistic regressions are
fitted (both features, cosine alone, BM25 alone), by Newton's method with a small L2 penalty, and printed as
the ``Calibration`` of the embedder's model id, ready for ``CALIBRATIONS`` or ``SEARCH_CALIBRATION``.

The cosines are the platform's, of the query's vector less the ``hub_discount`` in effect (the model's entry
in ``CALIBRATIONS``, or ``SEARCH_CALIBRATION``'s: set it there to fit another), which the printed object
keeps: the weights hold for that discount only.

The data is not LoCoMo's, and nothing is fitted to LoCoMo: it is measured with the result
(``bench.recall_quality``)."""

import argparse
import json
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.recall_quality import Platform

CALIBRATION = Path(__file__).parent / "calibration"
DATA = [CALIBRATION / "user_facts.json", CALIBRATION / "small_stores.json"]
L2 = 0.01


def log(message: str) -> None:
    print(f"[calibrate {time.strftime('%H:%M:%S')}] {message}", flush=True)


def fit_logistic(x: np.ndarray, y: np.ndarray, *, iterations: int = 50) -> np.ndarray:
    """Weights (the last one the bias) of a logistic regression of ``y`` on the columns of ``x``."""
    design = np.hstack([x, np.ones((x.shape[0], 1))])
    weights = np.zeros(design.shape[1])
    for _ in range(iterations):
        p = 1 / (1 + np.exp(-np.clip(design @ weights, -50, 50)))
        gradient = design.T @ (p - y) + L2 * np.r_[weights[:-1], 0]
        hessian = design.T @ (design * (p * (1 - p))[:, None]) + L2 * np.eye(design.shape[1])
        step = np.linalg.solve(hessian, gradient)
        weights -= step
        if np.abs(step).max() < 1e-9:
            break
    return weights


def read(path: Path) -> list[dict[str, Any]]:
    """The users of a data file, each ``{"id", "facts", "queries"}`` (``queries``: ``{"q", "relevant"}``, no
    relevant fact for an off-topic one), from either shape: ``users`` a list (``user_facts.json``; ids
    ``calibration-<n>``, as named in no question) or ``{id: {"facts", "offTopic"}}`` (``small_stores.json``,
    whose ids may be the user's first name, as an agent's often are: the platform reads a name in a question
    as "the user" then)."""
    data = json.loads(path.read_text())
    if isinstance(data["users"], list):
        return [
            {"id": f"calibration-{index}", "facts": user["facts"], "queries": user["queries"]}
            for index, user in enumerate(data["users"])
        ]
    users = []
    for user_id, user in data["users"].items():
        asked = [{"q": q, "relevant": [f["key"]]} for f in user["facts"] for q in f["questions"]]
        off = [{"q": q, "relevant": []} for q in user["offTopic"]]
        users.append({"id": user_id, "facts": user["facts"], "queries": asked + off})
    return users


def stores(
    users: list[dict[str, Any]], sizes: tuple[int, ...]
) -> list[tuple[int, str, list[dict[str, Any]]]]:
    """(user index, store's user id, facts) for every store: each user's facts whole, and split in order into
    stores of each of ``sizes`` facts (ids ``<user id>.<size>.<start>``: the same name)."""
    out: list[tuple[int, str, list[dict[str, Any]]]] = []
    for index, user in enumerate(users):
        facts = user["facts"]
        out.append((index, user["id"], facts))
        for size in sizes:
            for start in range(0, len(facts), size):
                out.append((index, f"{user['id']}.{size}.{start}", facts[start : start + size]))
    return out


def fit_hybrid(x: np.ndarray, y: np.ndarray, whole: np.ndarray) -> np.ndarray:
    """The hybrid weights: their direction (the ratio of the two features' weights, which alone orders a
    store's entries) fitted on the ``whole`` stores (the first data file's), where ranking matters; their
    scale and bias, which make the score a probability, fitted on the stores of every size of every file."""
    direction = fit_logistic(x[whole], y[whole])[:-1]
    scale, bias = fit_logistic((x @ direction)[:, None], y)
    return np.r_[scale * direction, bias]


def examples(
    platform: Platform, users: list[dict[str, Any]], sizes: tuple[int, ...]
) -> tuple[list[tuple[float, float, int, int]], str]:
    """(cos, bm25, relevant, whole) for every (question, fact of a store of its user), ``whole`` 1 for the
    user's whole store; and the embedder's model id."""
    from memoryplatform.embeddings import get_embedder
    from usermemory import selectors, services
    from usermemory.services import MemoryWrite, memory_upsert_batch

    categories = sorted({fact.get("category", "fact") for user in users for fact in user["facts"]})
    services.policy_update(agent_id=platform_agent(), allowed_categories=categories)
    every = stores(users, sizes)
    for _, user_id, facts in every:
        writes = [
            MemoryWrite(
                user_id=user_id,
                key=fact["key"],
                value=fact["value"],
                category=fact.get("category", "fact"),
                source_agent_id=platform_agent(),
            )
            for fact in facts
        ]
        memory_upsert_batch(caller=platform.caller, writes=writes, turn_id=user_id)
    platform.embed()
    rows: list[tuple[float, float, int, int]] = []
    for index, user_id, facts in every:
        whole = int(facts is users[index]["facts"] and users[index]["direction"])
        keys = {fact["key"] for fact in facts}
        for question in users[index]["queries"]:
            found = selectors.memory_search_ranked(
                caller=platform.caller,
                user_id=user_id,
                query=question["q"],
                mode="hybrid",
                limit=1000,
                min_score=0.0,
            )
            seen = {s.entry.key: s for s in found.entries}
            if set(seen) != keys:
                raise RuntimeError(f"{question['q']!r}: {len(seen)} of {len(keys)} facts ranked")
            relevant = set(question["relevant"])
            rows += [(s.cos or 0.0, s.bm25, int(key in relevant), whole) for key, s in seen.items()]
    embedder = get_embedder()
    return rows, embedder.model_id if embedder else ""


def hub_discount(model_id: str) -> float:
    """The discount of the generic question the examples' cosines were computed with."""
    from memoryplatform.relevance import calibration_for

    return calibration_for(model_id).hub_discount


def platform_agent() -> str:
    from bench.recall_quality import AGENT

    return AGENT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, nargs="+", default=DATA)
    parser.add_argument(
        "--db-url", default="", help="a PostgreSQL server (default: DATABASE_URL, or embedded)"
    )
    parser.add_argument(
        "--store-sizes",
        default="",
        help="also ask each question of its user's facts split into stores of these sizes, e.g. 1,2,4,8 "
        "(default: the whole stores only)",
    )
    args = parser.parse_args(argv)
    # The first file's whole stores fit the hybrid direction (how the two features trade, which alone orders
    # a store: user_facts.json's descriptive facts, the direction LoCoMo's hybrid hit@5 was measured with);
    # every store of every file fits its scale and bias (what makes it a probability: small stores too).
    users = [user | {"direction": n == 0} for n, path in enumerate(args.data) for user in read(path)]
    platform = Platform(args.db_url or os.environ.get("DATABASE_URL", ""))
    sizes = tuple(int(size) for size in args.store_sizes.split(",") if size)
    rows, model_id = examples(platform, users, sizes)
    table = np.array(rows, dtype=float)
    cos, bm25, y = table[:, 0:1], np.log1p(table[:, 1:2]), table[:, 2]
    log(
        f"{len(rows)} examples, {int(y.sum())} relevant, model {model_id}, "
        f"hub discount {hub_discount(model_id)}"
    )
    hybrid = fit_hybrid(np.hstack([cos, bm25]), y, table[:, 3] == 1)
    semantic = fit_logistic(cos, y)
    fulltext = fit_logistic(bm25, y)
    calibration = {
        "hybrid_cos": hybrid[0],
        "hybrid_bm25": hybrid[1],
        "hybrid_bias": hybrid[2],
        "semantic_cos": semantic[0],
        "semantic_bias": semantic[1],
        "fulltext_bm25": fulltext[0],
        "fulltext_bias": fulltext[1],
        "hub_discount": hub_discount(model_id),
    }
    for name, weights, x in (
        ("hybrid", hybrid, np.hstack([cos, bm25])),
        ("semantic", semantic, cos),
        ("fulltext", fulltext, bm25),
    ):
        p = 1 / (1 + np.exp(-(np.hstack([x, np.ones((len(x), 1))]) @ weights)))
        loss = -np.mean(y * np.log(p + 1e-12) + (1 - y) * np.log(1 - p + 1e-12))
        log(
            f"{name}: log loss {loss:.4f}; mean p relevant {p[y == 1].mean():.3f}, not {p[y == 0].mean():.3f}"
        )
    print(json.dumps({model_id: {k: round(float(v), 4) for k, v in calibration.items()}}, indent=2))
    if not all(math.isfinite(float(v)) for v in calibration.values()):
        raise SystemExit("the fit did not converge")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
