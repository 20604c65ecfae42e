"""What ``RERANK_PROVIDER=llm`` costs a ranked read (issue 55): the prompt it sends (characters, and tokens at
``memoryplatform.llm.CHARS_PER_TOKEN``), what the answer takes, and the latency it adds through REST against
the scripted LLM (``tests/llm_server.py``, answering at once: the platform's own cost, the model's time
excluded).

    env -u DATABASE_URL .venv/bin/python -m bench.rerank_cost [--facts 30] [--questions 20]

One user with ``--facts`` invented facts (written here, no benchmark's data), embedded, in a fresh database
(``bench_rerank``). Each question is asked through ``GET .../search?mode=hybrid`` (Django's test client: the
whole request path in process) with no reranker, then with the LLM reranker, alternately."""

import argparse
import json
import statistics
import time
from typing import Any

from bench.recall_quality import AGENT, Platform

BASE = "/usermemorystore/memories"
USER = "bench-rerank-user"
SUBJECTS = ["tea", "cycling", "jazz", "a cat", "Lisbon", "nursing", "chess", "Python", "hiking", "baking"]
SAYINGS = ["likes {s} a lot", "talked about {s} last week", "wants to learn more about {s}"]
QUESTIONS = [
    "what does the user drink",
    "which sport does the user do",
    "what music does the user like",
    "does the user have a pet",
    "where does the user live",
    "what is the user's job",
    "which games does the user play",
    "what does the user program in",
    "what does the user do outdoors",
    "what does the user cook",
]


def log(message: str) -> None:
    print(f"[rerank-cost {time.strftime('%H:%M:%S')}] {message}", flush=True)


def facts(count: int) -> list[tuple[str, str]]:
    """``count`` invented facts: each subject said in one of a few ways."""
    sayings = [SAYINGS[n // len(SUBJECTS) % len(SAYINGS)] for n in range(count)]
    return [(f"note_{n}", saying.format(s=SUBJECTS[n % len(SUBJECTS)])) for n, saying in enumerate(sayings)]


def answer(count: int) -> dict[str, Any]:
    return {"scores": [{"id": i, "relevance": round(1 - i / count, 3)} for i in range(count)]}


def run(count: int, questions: int) -> dict[str, Any]:
    platform = Platform("", name="bench_rerank")  # Django is set up from here
    from django.test import Client, override_settings

    from memoryplatform.rerank import get_reranker
    from tests.llm_server import Answer, LLMScript, llm_server
    from usermemory import services
    from usermemory.services import MemoryWrite, memory_upsert_batch

    services.policy_update(agent_id=AGENT, max_writes_per_turn=1000)
    writes = [MemoryWrite(user_id=USER, key=k, value=v, source_agent_id=AGENT) for k, v in facts(count)]
    memory_upsert_batch(caller=platform.caller, writes=writes, turn_id="rerank-cost")
    platform.embed()
    client = Client(HTTP_AUTHORIZATION=f"Bearer {platform.raw_key}", SERVER_NAME="127.0.0.1")
    asked = (QUESTIONS * questions)[:questions]
    plain: list[float] = []
    reranked: list[float] = []
    script = LLMScript([Answer(answer(min(count, 30)), input_tokens=0, output_tokens=0)])
    llm = {"LLM_PROVIDER": "openai", "LLM_MODEL": "bench-model", "RERANK_PROVIDER": "llm", "RERANK_DEPTH": 30}
    with llm_server(script):
        for question in [asked[0], *asked]:  # the first, again, warms both paths
            for settings, times in (
                ({"RERANK_PROVIDER": "none"}, plain),
                ({**llm, "LLM_URL": script.url}, reranked),
            ):
                get_reranker.cache_clear()
                with override_settings(**settings):
                    params: dict[str, str | int] = {"q": question, "mode": "hybrid", "limit": 5}
                    started = time.perf_counter()
                    response = client.get(f"{BASE}/{USER}/search", params)
                    times.append(time.perf_counter() - started)
                if response.status_code != 200 or "X-Search-Fallback" in response.headers:
                    raise SystemExit(f"{question}: {response.status_code} {dict(response.headers)}")
    get_reranker.cache_clear()
    prompts = [request["messages"] for request in script.requests]
    chars = [sum(len(m["content"]) for m in messages) for messages in prompts]
    answer_chars = len(json.dumps(answer(min(count, 30))))
    return {
        "facts": count,
        "questions": questions,
        "prompt characters (median)": statistics.median(chars),
        "prompt tokens (median, at 4 characters a token)": round(statistics.median(chars) / 4),
        "answer tokens (at 4 characters a token)": round(answer_chars / 4),
        "hybrid p50 ms, no reranker": round(statistics.median(plain[1:]) * 1000, 1),
        "hybrid p50 ms, llm reranker": round(statistics.median(reranked[1:]) * 1000, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--facts", type=int, default=30)
    parser.add_argument("--questions", type=int, default=20)
    args = parser.parse_args(argv)
    log(f"{args.facts} facts, {args.questions} questions")
    result = run(args.facts, args.questions)
    for name, value in result.items():
        print(f"- {name}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
