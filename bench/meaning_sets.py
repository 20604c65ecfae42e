"""Dream's meaning sets by key style, without and with the key rules (issue 46).

    env -u DATABASE_URL .venv/bin/python -m bench.meaning_sets [bench/calibration/meaning_keys.json] \\
        [--threshold 0.96] [--db-url URL] [--out /tmp/meaning.json]

Two data files ship: ``calibration/meaning_keys.json`` (the default) and ``calibration/meaning_keys_b.json``
(other keys). A data file holds invented users, each with a few entries whose values all differ, and the
pairs of that user's keys that mean the same thing (``same``); every other pair of a user's keys is not a
meaning set. The entries are written through the service, by one agent, in a fresh database
(``bench_meaning`` in the embedded server, or ``--db-url``). Then Dream's own grouping,
:func:`dream.meaning.find_pairs`, runs over every current entry with the configured embedder (the local
model by default) at ``--threshold`` (the policy's default), three times:

- ``before``: ``key_rules=False, shared_word_margin=0`` (every key embedded and compared);
- ``opaque``: ``key_rules=True, shared_word_margin=0`` (:func:`usermemory.keynames.key_carries_meaning` and
  :func:`usermemory.keynames.numbered_apart` alone);
- ``after``: the defaults (also :data:`dream.meaning.SHARED_WORD_MARGIN`).

No LLM confirms anything here: the figures are what a policy without ``confirmContradictionsWithLlm`` (the
default) flags.

Printed, per key style (the user's, from the data file): the true pairs labelled, and for each pass the
true pairs found, the false ones (pairs of keys that do not mean the same), and the false sets (a user's
connected pairs, as the admin's conflict page groups them; a set is false when one of its pairs is). Then
every false pair left after and every true pair missed, with the keys' cosine similarity, and, over the
``opaque`` pass's pairs, those where one key's words extend the other's (``open_ticket``/``ticket``) or the
two share a word (``first_name``/``last_name``) against a stricter threshold for those pairs alone.
"""

import argparse
import json
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import target

DATA = Path(__file__).parent / "calibration" / "meaning_keys.json"
DB_NAME = "bench_meaning"
AGENT = "meaning-bench"
STRICTER = (0.965, 0.97, 0.975, 0.98)

KeyPair = tuple[str, str, str]  # user, the smaller key, the larger key


def log(message: str) -> None:
    print(f"[meaning {time.strftime('%H:%M:%S')}] {message}", flush=True)


def key_pair(user: str, first: str, second: str) -> KeyPair:
    return (user, min(first, second), max(first, second))


@dataclass(frozen=True)
class Data:
    facts: dict[str, dict[str, str]]  # user: {key: value}
    style: dict[str, str]  # user: key style
    same: set[KeyPair]

    @classmethod
    def load(cls, path: Path) -> "Data":
        users = json.loads(path.read_text())["users"]
        same = {key_pair(user, a, b) for user, given in users.items() for a, b in given["same"]}
        for user, a, b in same:
            assert {a, b} <= users[user]["facts"].keys(), f"{user}: {a}/{b} is not among its keys"
        return cls(
            facts={user: given["facts"] for user, given in users.items()},
            style={user: given["style"] for user, given in users.items()},
            same=same,
        )

    def styles(self) -> list[str]:
        return list(dict.fromkeys(self.style.values()))


def setup(db_url: str, data: Data) -> None:
    """A fresh database, the bench's agent, and every user's entries written through the service."""
    chosen = target.resolve(db_url, name=DB_NAME)
    target.create(chosen, reset=True)
    target.django_setup(chosen)
    from django.core.management import call_command

    from apikeys.caller import Caller
    from apikeys.models import ApiKey
    from apikeys.services import agent_create, apikey_create
    from usermemory.services import MemoryWrite, memory_upsert_batch

    call_command("migrate", verbosity=0, interactive=False)
    agent_create(agent_id=AGENT, display_name="meaning sets bench")
    key, _ = apikey_create(role="agent", agent_id=AGENT, label="meaning sets bench")
    caller = Caller.for_key(ApiKey.objects.select_related("agent").get(id=key.id))
    for user, facts in data.facts.items():
        writes = [MemoryWrite(user_id=user, key=k, value=v, source_agent_id=AGENT) for k, v in facts.items()]
        memory_upsert_batch(caller=caller, writes=writes)


def found_pairs(*, threshold: float, **rules: Any) -> set[KeyPair]:
    """Dream's meaning pairs over every current entry, as (user, key, key), with these ``rules``
    (:func:`dream.meaning.find_pairs`' ``key_rules`` and ``shared_word_margin``; none: its defaults)."""
    from django.db.models import Q

    from dream.meaning import find_pairs
    from dream.selectors import dream_current_entries
    from usermemory.models import MemoryEntry

    pairs = find_pairs(current=dream_current_entries(), scope=Q(), threshold=threshold, **rules)
    ids = {i for p in pairs for i in (p.first, p.second)}
    keys = dict(MemoryEntry.objects.filter(id__in=ids).values_list("id", "key"))
    return {key_pair(p.user_id, keys[p.first], keys[p.second]) for p in pairs}


def similarities(data: Data) -> dict[KeyPair, float]:
    """The cosine similarity of every pair of a user's keys, from the vectors Dream kept."""
    from dream.store import key_vectors_read
    from memoryplatform.embeddings import get_embedder

    embedder = get_embedder()
    assert embedder is not None, "bench.meaning_sets needs an embedder (EMBEDDINGS_PROVIDER)"
    keys = sorted({k for facts in data.facts.values() for k in facts})
    vectors = key_vectors_read(model=embedder.model_id, keys=keys)
    sims = {}
    for user, facts in data.facts.items():
        user_keys = sorted(facts)
        for index, first in enumerate(user_keys):
            for second in user_keys[index + 1 :]:
                sims[key_pair(user, first, second)] = float(vectors[first] @ vectors[second])
    return sims


def sets_of(pairs: set[KeyPair]) -> list[set[KeyPair]]:
    """A user's connected pairs, one set each."""
    sets: list[set[KeyPair]] = []
    for pair in sorted(pairs):
        touching = [s for s in sets if any(p[0] == pair[0] and set(p[1:]) & set(pair[1:]) for p in s)]
        merged = {pair}.union(*touching)
        sets = [s for s in sets if s not in touching] + [merged]
    return sets


def tally(data: Data, found: set[KeyPair]) -> dict[str, dict[str, int]]:
    """Per key style (and ``all``): true pairs found, false pairs, true sets, false sets."""
    rows: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for pair in found:
        for style in (data.style[pair[0]], "all"):
            rows[style]["true pairs" if pair in data.same else "false pairs"] += 1
    for group in sets_of(found):
        for style in (data.style[next(iter(group))[0]], "all"):
            rows[style]["true sets" if group <= data.same else "false sets"] += 1
    return {style: dict(counts) for style, counts in rows.items()}


def relation(pair: KeyPair) -> str:
    """``extension`` (one key's words hold the other's), ``shared word``, or ``apart``."""
    from usermemory.keynames import key_words

    first, second = key_words(pair[1]), key_words(pair[2])
    if first and second and (first < second or second < first):
        return "extension"
    return "shared word" if first & second else "apart"


def stricter(data: Data, found: set[KeyPair], sims: dict[KeyPair, float], threshold: float) -> list[str]:
    """What a stricter threshold for extension and shared-word pairs alone would keep of the pairs
    ``found`` (and the true pairs it would lose)."""
    lines = ["| pairs | threshold | true kept | false kept |", "|---|---|---|---|"]
    for kind in ("extension", "shared word"):
        chosen = [p for p in found if relation(p) == kind]
        for bar in (threshold, *STRICTER):
            kept = [p for p in chosen if sims[p] >= bar]
            true = sum(p in data.same for p in kept)
            lines.append(f"| {kind} | {bar} | {true} | {len(kept) - true} |")
    return lines


PASSES: dict[str, dict[str, Any]] = {
    "before": {"key_rules": False, "shared_word_margin": 0.0},
    "opaque": {"key_rules": True, "shared_word_margin": 0.0},
    "after": {},
}


def style_table(data: Data, found: dict[str, set[KeyPair]]) -> list[str]:
    labelled: dict[str, int] = defaultdict(int)
    for pair in data.same:
        labelled[data.style[pair[0]]] += 1
        labelled["all"] += 1
    counts = {name: tally(data, pairs) for name, pairs in found.items()}
    head = "".join(f" {n}: true found | {n}: false pairs | {n}: false sets |" for n in found)
    lines = [f"| key style | true pairs |{head}", "|---|---|" + "---|---|---|" * len(found)]
    for style in [*data.styles(), "all"]:
        cells = []
        for name in found:
            c = counts[name].get(style, {})
            false_sets, sets = c.get("false sets", 0), c.get("false sets", 0) + c.get("true sets", 0)
            cells += [str(c.get("true pairs", 0)), str(c.get("false pairs", 0)), f"{false_sets} of {sets}"]
        lines.append(f"| {style} | {labelled.get(style, 0)} | " + " | ".join(cells) + " |")
    return lines


def report(data: Data, found: dict[str, set[KeyPair]], sims: dict[KeyPair, float], threshold: float) -> str:
    after = found["after"]
    lines = [
        f"threshold {threshold}; {len(data.facts)} users, {sum(map(len, data.facts.values()))} keys, "
        f"{len(sims)} pairs of a user's keys, {len(data.same)} of them true",
        "",
        *style_table(data, found),
        "",
        "false pairs after:",
    ]
    lines += [f"  {sims[p]:.4f} {p[0]}: {p[1]} / {p[2]} ({relation(p)})" for p in sorted(after - data.same)]
    lines += ["true pairs missed after:"]
    lines += [f"  {sims[p]:.4f} {p[0]}: {p[1]} / {p[2]} ({relation(p)})" for p in sorted(data.same - after)]
    lines += ["", "the opaque pass's pairs that share a word, at a stricter threshold for them alone:"]
    lines += stricter(data, found["opaque"], sims, threshold)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("data", nargs="?", type=Path, default=DATA)
    parser.add_argument("--threshold", type=float, default=0.96)
    parser.add_argument("--db-url", default="")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    data = Data.load(args.data)
    log(f"writing {len(data.facts)} users' entries")
    setup(args.db_url, data)
    found = {}
    for name, rules in PASSES.items():
        log(f"{name}: {rules or 'the defaults'}")
        found[name] = found_pairs(threshold=args.threshold, **rules)
    sims = similarities(data)  # the before pass embedded every key
    print(report(data, found, sims, args.threshold))
    if args.out:
        result: dict[str, Any] = {
            "threshold": args.threshold,
            **{name: sorted(pairs) for name, pairs in found.items()},
            "similarities": {" / ".join(p): s for p, s in sorted(sims.items())},
        }
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
