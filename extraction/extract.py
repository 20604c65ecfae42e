"""The door's extraction (``POST /usermemorystore/memories/{userId}/extract``, the Python client, the MCP
tool): the caller's messages checked, the agent and the visibility resolved and bounded, then one
:func:`extraction.services.extraction_run`."""

from dataclasses import dataclass
from typing import Any

from apikeys.caller import Caller
from apikeys.models import Agent
from apikeys.services import caller_require_writer
from conversations.models import Channel, Message
from conversations.selectors import conversation_get_for, uuid_or_none
from extraction.decide import Bound, Scope
from extraction.services import (
    MAX_MESSAGES,
    ExtractionRequest,
    Outcome,
    SourceMessage,
    extraction_run,
    messages_bound,
)
from memoryplatform import publicids
from memoryplatform.errors import BadRequest, Forbidden, NotFound, Unavailable, UpstreamFailed
from memoryplatform.llm import LLMError, build_llm
from memoryplatform.text import is_blank, text_problem
from usermemory.models import DEFAULT_ALLOWED_CATEGORIES, Visibility
from usermemory.selectors import policy_for_agent

ROLES = ("user", "assistant", "system", "tool")
MAX_CONTENT_CHARS = 20_000
ANY = Bound(Visibility.GLOBAL)


@dataclass(frozen=True)
class GivenMessage:
    role: str
    content: str
    message_id: str | None = None


def _agent_of(caller: Caller, agent_id: str | None) -> Agent:
    """An agent key extracts as its agent; an admin key names the agent."""
    caller_require_writer(caller)
    if caller.is_agent:
        if agent_id and agent_id != caller.agent_id:
            raise Forbidden(f"An agent key for '{caller.agent_id}' cannot extract as agent '{agent_id}'.")
        if caller.agent is None:  # an agent key always names its agent
            raise Forbidden("This agent key names no agent.")
        return caller.agent
    if not agent_id:
        raise BadRequest("agentId is required with an admin key: the agent the facts are written as.")
    agent = Agent.objects.filter(id=agent_id).first()
    if agent is None:
        raise NotFound(f"No agent '{agent_id}'.")
    return agent


def _check_messages(messages: list[GivenMessage]) -> None:
    if not 1 <= len(messages) <= MAX_MESSAGES:
        raise BadRequest(f"messages holds 1 to {MAX_MESSAGES} messages.")
    for index, message in enumerate(messages):
        if message.role not in ROLES:
            raise BadRequest(f"messages[{index}].role must be one of {', '.join(ROLES)}.")
        if is_blank(message.content) or len(message.content) > MAX_CONTENT_CHARS:
            raise BadRequest(f"messages[{index}].content is 1 to {MAX_CONTENT_CHARS} characters, not blank.")
        if message.message_id is not None and is_blank(message.message_id):
            raise BadRequest(f"messages[{index}].id, when given, must not be blank.")
        for name, text in (("content", message.content), ("id", message.message_id)):
            problem = text_problem(text) if text else None
            if problem:
                raise BadRequest(f"messages[{index}].{name} {problem}.")


def _conversation_bounds(
    *, agent: Agent, user_id: str, conversation_id: str, messages: list[GivenMessage]
) -> list[Bound]:
    """Each message's bound: the conversation's (its group's, else the policy's ``extractionVisibility``); a
    message named by id must be one the agent may read in it, and one of its own memory channel is
    ``self``."""
    caller = Caller(role="agent", agent=agent)
    conversation = conversation_get_for(caller=caller, conversation_id=conversation_id)
    if conversation.user_id != user_id:
        raise BadRequest(f"Conversation '{conversation_id}' is not of user '{user_id}'.")
    if conversation.group_id:
        bound = Bound(Visibility.GROUP, (conversation.group_id,))
    else:
        bound = Bound(policy_for_agent(agent_id=agent.id).extraction_visibility)
    ids = {m.message_id for m in messages if m.message_id}
    found = {
        str(pk): (channel, owner)
        for pk, channel, owner in Message.objects.filter(
            conversation=conversation, pk__in=[u for u in map(uuid_or_none, ids) if u]
        ).values_list("pk", "channel", "agent_id")
    }
    bounds: list[Bound] = []
    for index, message in enumerate(messages):
        if not message.message_id:
            bounds.append(bound)
            continue
        channel, owner = found.get(str(uuid_or_none(message.message_id)), (None, None))
        if channel is None or (channel == Channel.MEMORY and owner != agent.id):
            raise BadRequest(f"messages[{index}].id: no such message in conversation '{conversation_id}'.")
        bounds.append(Bound(Visibility.SELF) if channel == Channel.MEMORY else bound)
    return bounds


def _scope(*, visibility: str | None, group_ids: list[str] | None, bound: Bound, default: str) -> Scope:
    """Where new facts go: as asked, else the policy's ``extractionVisibility`` (narrowed to ``bound``, the
    narrowest of the messages'); a scope broader than ``bound`` allows is refused."""
    asked = visibility is not None or bool(group_ids)
    wanted = visibility or (Visibility.GROUP if group_ids else default)
    groups = tuple(dict.fromkeys(group_ids or ()))
    if wanted == Visibility.GROUP and not groups and bound.most == Visibility.GROUP and bound.groups:
        groups = bound.groups
    scope = Scope(wanted, groups if wanted == Visibility.GROUP else ())
    if bound.allows(scope):
        return scope
    if asked:
        most = bound.most + (f" of {', '.join(bound.groups)}" if bound.groups else "")
        raise BadRequest(
            f"Facts from these messages are at most '{most}': the agents that could not read one of them "
            "must not see them."
        )
    return Scope(Visibility.GROUP, bound.groups) if bound.groups else Scope(Visibility.SELF)


def memory_extract(
    *,
    caller: Caller,
    user_id: str,
    messages: list[GivenMessage],
    agent_id: str | None = None,
    visibility: str | None = None,
    group_ids: list[str] | None = None,
    category: str | None = None,
    conversation_id: str | None = None,
    dry_run: bool = False,
    turn_id: str | None = None,
) -> Outcome:
    """Extract the facts about ``user_id`` from ``messages`` and add, update or leave them (see
    :mod:`extraction.services`). 409 without an LLM (``LLM_PROVIDER`` empty); 429 before the call when the
    agent's LLM budget is spent (:mod:`activity.budget`); 502 when the call fails or its answer is refused,
    recorded, and nothing changed."""
    agent = _agent_of(caller, agent_id)
    if is_blank(user_id) or len(user_id) > 255 or text_problem(user_id):
        raise BadRequest("userId is 1 to 255 characters of storable text.")
    _check_messages(messages)
    policy = policy_for_agent(agent_id=agent.id)
    allowed = policy.allowed_categories or list(DEFAULT_ALLOWED_CATEGORIES)
    if category is not None and category not in allowed:
        raise BadRequest(
            f"category '{category}' is not allowed (allowedCategories: {', '.join(allowed)}).",
            details={"limit": "allowedCategories", "allowed": allowed},
        )
    if visibility is not None and visibility not in Visibility.values:
        raise BadRequest(f"visibility must be one of {', '.join(Visibility.values)}.")
    bounds = [ANY] * len(messages)
    if conversation_id:
        bounds = _conversation_bounds(
            agent=agent, user_id=user_id, conversation_id=conversation_id, messages=messages
        )
    sources = [
        SourceMessage(m.role, m.content, m.message_id, b) for m, b in zip(messages, bounds, strict=True)
    ]
    scope = _scope(
        visibility=visibility,
        group_ids=group_ids,
        bound=messages_bound(sources),
        default=policy.extraction_visibility,
    )
    try:
        llm = build_llm()
    except LLMError as exc:
        raise Unavailable(f"The LLM settings are wrong: {exc}") from exc
    if llm is None:
        raise Unavailable("Extraction needs an LLM: LLM_PROVIDER is empty on this server.")
    request = ExtractionRequest(
        agent=agent,
        user_id=user_id,
        messages=sources,
        scope=scope,
        category=category,
        conversation_id=conversation_id,
        dry_run=dry_run,
        turn_id=turn_id,
    )
    try:
        return extraction_run(request=request, llm=llm)
    except LLMError as exc:
        raise UpstreamFailed(f"Extraction failed; nothing changed: {exc}") from exc


def outcome_as_json(outcome: Outcome) -> dict[str, Any]:
    """The answer of every door: the operations, each with its entry's (public) id."""
    record = outcome.extraction
    return {
        "userId": record.user_id,
        "agentId": record.agent_id,
        "conversationId": record.conversation_id or None,
        "dryRun": record.dry_run,
        "model": record.model,
        "promptVersion": record.prompt_version,
        "cost": float(record.cost),
        "added": record.facts_added,
        "updated": record.facts_updated,
        "unchanged": record.facts_unchanged,
        "rejected": record.facts_rejected,
        "operations": [
            {**op, "entryId": publicids.public_str(publicids.ENTRY, op.get("entryId"))}
            for op in outcome.operations
        ],
    }
