"""The LLM behind Dream's summaries and meaning checks: one small interface, two protocols.

- ``openai``: OpenAI-compatible chat completions, ``POST {LLM_URL}/v1/chat/completions`` (OpenAI, Azure's
  OpenAI-compatible endpoint, Ollama, vLLM, LM Studio), ``Authorization: Bearer``.
- ``anthropic``: Anthropic's Messages API, ``POST {LLM_URL}/v1/messages``, ``x-api-key``.

:meth:`LLM.complete_json` sends a system text and a prompt, reads the answer as JSON and validates it against
a JSON Schema (``jsonschema``). Its cost is computed from the usage the API returned and the model's prices
(``LLM_PRICES``, dollars per million input and output tokens, over :data:`DEFAULT_PRICES`). Every failure
(refused, timed out, an HTTP error, an answer that is not JSON, nested too deep, holding ``NaN`` or another
number JSON does not have, or not matching the schema, whose integers are JSON integers:
:mod:`memoryplatform.jsonschemas`) is an :class:`LLMError`, which carries the cost of
the call when the API answered with its usage: a malformed answer was still paid for. A call made for an
agent is paid from its LLM budget (a :class:`Spending`: :mod:`activity.budget`): the most it may cost is
reserved before the call, and settled to what it cost after.
"""

import logging
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol

from django.conf import settings
from jsonschema.exceptions import ValidationError

from memoryplatform.httpjson import ProviderClient
from memoryplatform.jsonschemas import StrictValidator
from memoryplatform.providercalls import ProviderBusy
from memoryplatform.text import json_loads, json_problem

logger = logging.getLogger(__name__)

PROTOCOLS = ("openai", "anthropic")
DEFAULT_URLS = {"openai": "https://api.openai.com", "anthropic": "https://api.anthropic.com"}
ANTHROPIC_VERSION = "2023-06-01"
# Dollars per million tokens (input, output), list prices when this was written; LLM_PRICES overrides or
# adds models. A model in neither costs 0 (a local model), with a warning.
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
    "claude-3-5-haiku-latest": (0.80, 4.00),
    "claude-haiku-4-5": (1.00, 5.00),
    "claude-sonnet-4-5": (3.00, 15.00),
}
# A prompt's tokens, estimated before the call (for the cost cap): about 4 characters a token.
CHARS_PER_TOKEN = 4
MAX_USAGE_TOKENS = 10**9
"""The most tokens the usage of one call may count, input or output: no model reads or writes a billion
tokens in one call. A usage that is not an integer from 0 to this is a malformed answer (a provider's bug,
or not a provider at all), charged as the most the call could have cost (:meth:`LLM.worst_cost`): never
negative (it would raise what is left of a budget), never past the cost columns."""
MAX_STORED_COST = Decimal("999999.999999")
"""The most dollars a cost column holds (12 digits, 6 of them decimals): :func:`stored_cost`."""


def stored_cost(cost: float) -> Decimal:
    """Dollars as the cost columns store them: rounded to 6 decimals, from 0 to :data:`MAX_STORED_COST`
    (past it, with a warning: a price in ``LLM_PRICES`` far above any model's, or a sum of such calls)."""
    if not math.isfinite(cost) or cost > MAX_STORED_COST:
        logger.warning(
            "An LLM cost of $%s is stored as $%s, the most its column holds", cost, MAX_STORED_COST
        )
        return MAX_STORED_COST
    return max(Decimal(0), Decimal(str(round(cost, 6))))


def _usage_tokens(value: Any) -> int | None:
    """A token count of the provider's usage (absent: 0), or ``None`` when it is not an integer from 0 to
    :data:`MAX_USAGE_TOKENS` (``true``, ``1.5``, ``"1000"``, ``-5``, ``10**13``)."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_USAGE_TOKENS:
        return None
    return value


class LLMError(Exception):
    """A call that gave no valid answer; ``cost``: what it cost anyway (the API's usage), else 0."""

    def __init__(self, message: str, *, cost: float = 0.0) -> None:
        super().__init__(message)
        self.cost = cost


@dataclass(frozen=True)
class Price:
    """Dollars per million tokens."""

    input: float
    output: float

    def cost(self, *, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input + output_tokens * self.output) / 1_000_000

    @property
    def free(self) -> bool:
        return self.input == 0 and self.output == 0


class Spending(Protocol):
    """Who pays for a call (an agent's LLM budget: :class:`activity.budget.AgentBudget`): ``reserve`` is
    told the most the call may cost before it is made, and may refuse it by raising; ``settle`` is told what
    it cost once it answered or failed (:meth:`LLM.complete_json`)."""

    def reserve(self, estimate: float) -> None: ...

    def settle(self, cost: float) -> None: ...


@dataclass(frozen=True)
class Completion:
    """A valid answer: the JSON, the tokens the API counted, and their cost in dollars."""

    data: Any
    input_tokens: int
    output_tokens: int
    cost: float


def price_of(model: str) -> Price:
    """The model's prices: ``LLM_PRICES`` first, then :data:`DEFAULT_PRICES`, else 0 (logged)."""
    prices = {**DEFAULT_PRICES, **{k: tuple(v) for k, v in settings.LLM_PRICES.items()}}
    if model not in prices:
        logger.warning("LLM model %r has no price (LLM_PRICES): its calls are counted as free", model)
        return Price(0.0, 0.0)
    given_input, given_output = prices[model]
    return Price(float(given_input), float(given_output))


def _json_of(text: str, *, cost: float) -> Any:
    """The JSON of an answer's text (a model may wrap it in a Markdown code fence), parsed as every door
    parses a body (:func:`memoryplatform.text.json_loads`: no ``NaN`` nor ``Infinity``, no key twice) and
    checked as every stored value is (:func:`memoryplatform.text.json_problem`: finite numbers, storable
    strings, at most ``MAX_JSON_DEPTH`` levels); :class:`LLMError` with the call's ``cost`` otherwise. An
    answer nested past Python's recursion limit is malformed too, not a ``RecursionError``."""
    text = text.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    try:
        data = json_loads(text)
    except ValueError as exc:
        raise LLMError(f"the model's answer is not JSON: {exc}", cost=cost) from exc
    except RecursionError as exc:
        raise LLMError("the model's answer is not JSON: nested too deep to parse", cost=cost) from exc
    problem = json_problem(data)
    if problem:
        raise LLMError(f"the model's answer is refused: {problem}", cost=cost)
    return data


class LLM:
    """One configured model behind one protocol. Build it with :func:`build_llm`."""

    def __init__(
        self,
        *,
        protocol: str,
        url: str,
        model: str,
        api_key: str,
        timeout: float,
        max_tokens: int,
        price: Price,
    ) -> None:
        if protocol not in PROTOCOLS:
            raise LLMError(f"LLM_PROVIDER must be one of {', '.join(PROTOCOLS)}; got {protocol!r}.")
        if not model:
            raise LLMError("LLM_MODEL is required with LLM_PROVIDER set.")
        self.protocol = protocol
        self.model = model
        self.price = price
        base = (url or DEFAULT_URLS[protocol]).rstrip("/").removesuffix("/v1")
        path = "/v1/chat/completions" if protocol == "openai" else "/v1/messages"
        self.endpoint = base + path
        self._max_tokens = max_tokens
        if protocol == "openai":
            headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        else:
            headers = {"anthropic-version": ANTHROPIC_VERSION, **({"x-api-key": api_key} if api_key else {})}
        self._http = ProviderClient(timeout=timeout, headers=headers, error=LLMError, busy=ProviderBusy)

    def estimate_cost(self, *, system: str, prompt: str) -> float:
        """What sending this prompt would cost, from its estimated tokens (before any answer)."""
        tokens = math.ceil((len(system) + len(prompt)) / CHARS_PER_TOKEN)
        return self.price.cost(input_tokens=tokens, output_tokens=0)

    def worst_cost(self, *, system: str, prompt: str) -> float:
        """The most this prompt's call can cost: its estimated tokens in, ``LLM_MAX_TOKENS`` out. What a call
        whose usage is not valid is charged (:data:`MAX_USAGE_TOKENS`)."""
        return self.estimate_cost(system=system, prompt=prompt) + self.price.cost(
            input_tokens=0, output_tokens=self._max_tokens
        )

    def complete_json(
        self, *, system: str, prompt: str, schema: dict[str, Any], spending: Spending | None = None
    ) -> Completion:
        """Ask for a JSON answer matching ``schema``; :class:`LLMError` when there is none: with the call's
        cost from its usage, or, when the usage is not valid, its :meth:`worst_cost`. ``spending`` (unless
        the model is free) reserves the most the call may cost first (:meth:`worst_cost`: the prompt and
        ``LLM_MAX_TOKENS`` of answer), which may refuse the call (its own error, raised before anything is
        sent), and settles it with the cost, whatever the outcome: the difference is released."""
        if spending is None or self.price.free:
            return self._complete(system=system, prompt=prompt, schema=schema)
        spending.reserve(self.worst_cost(system=system, prompt=prompt))
        try:
            done = self._complete(system=system, prompt=prompt, schema=schema)
        except LLMError as exc:
            spending.settle(exc.cost)
            raise
        except ProviderBusy:  # refused before it was sent: nothing spent
            spending.settle(0.0)
            raise
        spending.settle(done.cost)
        return done

    def _complete(self, *, system: str, prompt: str, schema: dict[str, Any]) -> Completion:
        payload = self._http.post_json(self.endpoint, self._body(system, prompt))  # parsed as the doors parse
        try:
            text, given_input, given_output = self._read(payload)
        except (ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError) as exc:
            raise LLMError(f"{self.endpoint}: an answer of the wrong shape ({type(exc).__name__})") from exc
        input_tokens, output_tokens = _usage_tokens(given_input), _usage_tokens(given_output)
        if input_tokens is None or output_tokens is None:
            raise LLMError(
                f"{self.endpoint}: the answer's usage is not token counts from 0 to {MAX_USAGE_TOKENS:,}; "
                "charged as the most the call could cost",
                cost=self.worst_cost(system=system, prompt=prompt),
            )
        cost = self.price.cost(input_tokens=input_tokens, output_tokens=output_tokens)
        data = _json_of(text, cost=cost)
        try:
            StrictValidator(schema).validate(data)
        except ValidationError as exc:
            raise LLMError(f"the model's answer does not match the schema: {exc.message}", cost=cost) from exc
        return Completion(data, input_tokens, output_tokens, cost)

    def _body(self, system: str, prompt: str) -> dict[str, Any]:
        """The request's body in the protocol's shape."""
        if self.protocol == "openai":
            return {
                "model": self.model,
                "messages": [{"role": "system", "content": system}, {"role": "user", "content": prompt}],
                "temperature": 0,
                "max_tokens": self._max_tokens,
                "response_format": {"type": "json_object"},
            }
        return {
            "model": self.model,
            "system": system,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0,
            "max_tokens": self._max_tokens,
        }

    def _read(self, payload: dict[str, Any]) -> tuple[str, Any, Any]:
        """The answer's text and its input and output tokens as the usage gives them (not checked yet)."""
        usage = payload.get("usage") or {}
        if self.protocol == "openai":
            text = payload["choices"][0]["message"]["content"]
            return str(text), usage.get("prompt_tokens"), usage.get("completion_tokens")
        text = "".join(part["text"] for part in payload["content"] if part.get("type") == "text")
        return text, usage.get("input_tokens"), usage.get("output_tokens")


def build_llm(*, timeout: float | None = None) -> LLM | None:
    """The LLM the settings describe, or ``None`` when ``LLM_PROVIDER`` is empty; :class:`LLMError` when they
    are wrong. ``timeout``: a call's, in place of ``LLM_TIMEOUT`` (the LLM reranker's: ``RERANK_TIMEOUT``)."""
    protocol = settings.LLM_PROVIDER
    if not protocol:
        return None
    return LLM(
        protocol=protocol,
        url=settings.LLM_URL,
        model=settings.LLM_MODEL,
        api_key=settings.LLM_API_KEY,
        timeout=settings.LLM_TIMEOUT if timeout is None else timeout,
        max_tokens=settings.LLM_MAX_TOKENS,
        price=price_of(settings.LLM_MODEL),
    )
