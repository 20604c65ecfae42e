"""A real HTTP server speaking the OpenAI chat-completions protocol (``POST /v1/chat/completions``) and
Anthropic's Messages API (``POST /v1/messages``), with scripted answers and usage.

Each request takes the next :class:`Answer` of the script (the last one repeats): its ``content`` as the
model's text, its token counts as the usage, or ``status`` as an HTTP error, or a ``delay`` first (for
timeouts), or its body sent a byte every ``trickle`` seconds (a server slower than a whole call's timeout
whose every read is quick), or held until its ``hold`` event is set (a provider that hangs, for as long as a
test needs). Each request received releases ``received`` once, so a test can wait for calls to arrive. A
request whose prompt (its last message's text) holds a text of ``when`` gets that text's answer instead, as
a model answers what it reads. Every request body is recorded in ``requests``."""

import json
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.embedding_server import JsonHandler, serving


@dataclass
class Answer:
    content: Any = ""  # a str as sent, anything else as JSON text
    input_tokens: Any = 1000  # any JSON value: a provider's usage, hostile or not
    output_tokens: Any = 200
    status: int = 200
    delay: float = 0.0
    trickle: float = 0.0
    hold: threading.Event | None = None


@dataclass
class LLMScript:
    answers: list[Answer]
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""
    when: dict[str, Answer] = field(default_factory=dict)  # a text of the prompt -> the answer to it
    received: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))

    def answer_to(self, body: dict[str, Any], index: int) -> Answer:
        messages = body.get("messages") or [{}]
        prompt = messages[-1].get("content")
        for text, answer in self.when.items():
            if isinstance(prompt, str) and text in prompt:
                return answer
        return self.answers[min(index, len(self.answers) - 1)]


def _sum(first: Any, second: Any) -> Any:
    """The usage's total, when both counts are numbers (a scripted usage may be anything)."""
    numbers = all(isinstance(n, int | float) and not isinstance(n, bool) for n in (first, second))
    return first + second if numbers else None


@contextmanager
def llm_server(script: LLMScript) -> Iterator[LLMScript]:
    lock = threading.Lock()

    class Handler(JsonHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                index = len(script.requests)
                headers = {k.lower(): v for k, v in self.headers.items()}
                script.requests.append({"path": self.path, "headers": headers, **body})
                answer = script.answer_to(body, index)
            script.received.release()
            if answer.hold is not None:
                answer.hold.wait(timeout=120)
            if answer.delay:
                time.sleep(answer.delay)
            if answer.status != 200:
                self._answer(answer.status, {"error": {"message": "scripted failure"}})
                return
            text = answer.content if isinstance(answer.content, str) else json.dumps(answer.content)
            if self.path == "/v1/chat/completions":
                payload: dict[str, Any] = {
                    "id": f"chatcmpl-{index}",
                    "object": "chat.completion",
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {
                        "prompt_tokens": answer.input_tokens,
                        "completion_tokens": answer.output_tokens,
                        "total_tokens": _sum(answer.input_tokens, answer.output_tokens),
                    },
                }
            elif self.path == "/v1/messages":
                payload = {
                    "id": f"msg_{index}",
                    "type": "message",
                    "role": "assistant",
                    "model": body["model"],
                    "content": [{"type": "text", "text": text}],
                    "stop_reason": "end_turn",
                    "usage": {"input_tokens": answer.input_tokens, "output_tokens": answer.output_tokens},
                }
            else:
                self._answer(404, {"error": {"message": "no such path"}})
                return
            self._answer(200, payload, trickle=answer.trickle)

    with serving(Handler) as script.url:
        yield script


def main(argv: list[str]) -> None:
    """``python -m tests.llm_server FILE``: serve until stopped, answering every request with the answers
    of FILE, a JSON list of contents or an object whose ``llm.answers`` is one (as
    ``clients/scenario/contract.json``); the first line printed is the URL. For the TypeScript client's
    tests."""
    loaded = json.loads(Path(argv[0]).read_text())
    contents = loaded["llm"]["answers"] if isinstance(loaded, dict) else loaded
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    with llm_server(LLMScript([Answer(content) for content in contents])) as script:
        print(script.url, flush=True)
        stopped.wait()


if __name__ == "__main__":
    main(sys.argv[1:])
