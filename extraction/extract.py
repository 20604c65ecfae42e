"""The door's extraction (``POST /usermemorystore/memories/{userId}/extract``, the Python client, the MCP
tool): the caller's messages checked, or a stored conversation's read (:mod:`extraction.stored`: what the
agent may read, less what it extracted before), the agent and the visibility resolved and bounded, then one
:func:`extraction.services.extraction_run`, which claims the stored messages it read with its writes."""

from dataclasses import dataclass, field
from functools import partial
from typing import Any

from django.db import transaction
from django.utils import timezone

from apikeys.caller import Caller
from apikeys.models import Agent
from apikeys.services import caller_require_writer
from conversations.models import Channel, Conversation
from conversations.selectors import conversation_get_for
from extraction import stored
from extraction.decide import Bound, Scope
from extraction.models import Extraction
from extraction.policy import extraction_policy_for
from extraction.prompts import PROMPT_VERSION
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
from memoryplatform.llm import LLM, LLMError, build_llm
from memoryplatform.text import is_blank, text_problem
from usermemory.models import DEFAULT_ALLOWED_CATEGORIES, MAX_KEY_CHARS, Visibility
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


@dataclass
class Sources:
    """What one extraction at the door reads: the messages sent to the model, the positions of the stored
    ones it claims once its facts are written (:func:`extraction.stored.claim`), and the ids named that this
    agent extracted before (left out)."""

    messages: list[SourceMessage] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    conversation: Conversation | None = None


def _conversation_of(*, agent: Agent, user_id: str, conversation_id: str) -> tuple[Conversation, Bound]:
    """The conversation (one the agent may take part in, of this user) and its bound: its group's, else
    the policy's ``extractionVisibility``."""
    caller = Caller(role="agent", agent=agent)
    conversation = conversation_get_for(caller=caller, conversation_id=conversation_id)
    if conversation.user_id != user_id:
        raise BadRequest(f"Conversation '{conversation_id}' is not of user '{user_id}'.")
    if conversation.group_id:
        return conversation, Bound(Visibility.GROUP, (conversation.group_id,))
    return conversation, Bound(extraction_policy_for(agent_id=agent.id).extraction_visibility)


def _given_in_conversation(
    *, agent: Agent, conversation: Conversation, bound: Bound, messages: list[GivenMessage]
) -> Sources:
    """The messages a caller sends, in a conversation: each at the conversation's bound; one named by id
    must be one the agent may read in it (one of its own memory channel is ``self``), carries its stored
    time, and is left out when this agent extracted it before."""
    named = stored.named_messages(
        conversation=conversation, agent_id=agent.id, ids=[m.message_id for m in messages if m.message_id]
    )
    sources = Sources(conversation=conversation)
    for index, message in enumerate(messages):
        if not message.message_id:
            sources.messages.append(SourceMessage(message.role, message.content, None, bound))
            continue
        found = named.get(message.message_id)
        if found is None or (found.channel == Channel.MEMORY and found.author != agent.id):
            raise BadRequest(f"messages[{index}].id: no such message in conversation '{conversation.pk}'.")
        if found.covered:
            sources.already.append(message.message_id)
            continue
        message_bound = Bound(Visibility.SELF) if found.channel == Channel.MEMORY else bound
        sources.messages.append(
            SourceMessage(
                message.role,
                message.content,
                message.message_id,
                message_bound,
                found.created_at,
                found.position,
            )
        )
        sources.positions.append(found.position)
    return sources


def _stored_in_conversation(
    *, agent: Agent, conversation: Conversation, bound: Bound, after: str | None, ids: list[str] | None
) -> Sources:
    """The stored messages to read (:func:`extraction.stored.read_stored`), as the model is sent them."""
    reading = stored.read_stored(
        conversation=conversation,
        agent=agent,
        bound=bound,
        limit=MAX_MESSAGES,
        after_message_id=after,
        message_ids=ids,
    )
    messages = [
        SourceMessage(m.role, m.text, m.message_id, m.bound, m.created_at, m.position)
        for m in reading.messages
    ]
    return Sources(messages, reading.positions, reading.already, conversation)


def _check_reading(
    *,
    messages: list[GivenMessage] | None,
    conversation_id: str | None,
    after_message_id: str | None,
    message_ids: list[str] | None,
) -> None:
    """Messages are sent, or read from the stored conversation (all past what this agent extracted, past
    ``afterMessageId``, or those of ``messageIds``), never both."""
    reads = after_message_id is not None or message_ids is not None
    if not conversation_id and (messages is None or reads):
        raise BadRequest(
            "messages: required, unless conversationId names a stored conversation to read them from "
            "(afterMessageId and messageIds read it too)."
        )
    if messages is not None and reads:
        raise BadRequest("Send messages, or read them from the conversation (afterMessageId, messageIds).")
    if after_message_id is not None and message_ids is not None:
        raise BadRequest("Give afterMessageId or messageIds, not both.")
    if messages is not None:
        _check_messages(messages)
    if message_ids is not None and not 1 <= len(message_ids) <= MAX_MESSAGES:
        raise BadRequest(f"messageIds holds 1 to {MAX_MESSAGES} message ids.")
    for name, text in [("afterMessageId", after_message_id), *(("messageIds", i) for i in message_ids or [])]:
        if text is not None and (not isinstance(text, str) or is_blank(text) or text_problem(text)):
            raise BadRequest(f"{name}: a message's id, as the conversation gave it.")


def _sources(
    *,
    agent: Agent,
    user_id: str,
    messages: list[GivenMessage] | None,
    conversation_id: str | None,
    after_message_id: str | None,
    message_ids: list[str] | None,
) -> Sources:
    if not conversation_id:  # the caller vouches for its messages: their bound is global
        given = messages or []
        return Sources([SourceMessage(m.role, m.content, m.message_id, ANY) for m in given])
    conversation, bound = _conversation_of(agent=agent, user_id=user_id, conversation_id=conversation_id)
    if messages is not None:
        return _given_in_conversation(agent=agent, conversation=conversation, bound=bound, messages=messages)
    return _stored_in_conversation(
        agent=agent, conversation=conversation, bound=bound, after=after_message_id, ids=message_ids
    )


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


def _check_key_prefix(key_prefix: str | None) -> None:
    """A key prefix is a key's start, as keys are checked (storable text, not blank, bounded), that ends
    with ``/``: the facts' keys follow it."""
    if key_prefix is None:
        return
    problem = text_problem(key_prefix)
    if is_blank(key_prefix) or len(key_prefix) >= MAX_KEY_CHARS or not key_prefix.endswith("/") or problem:
        raise BadRequest(
            f"keyPrefix is the start of a key that ends with '/' (like 'memories/'), at most "
            f"{MAX_KEY_CHARS - 1} characters of storable text{': it ' + problem if problem else ''}."
        )


def _llm() -> LLM:
    try:
        llm = build_llm()
    except LLMError as exc:
        raise Unavailable(f"The LLM settings are wrong: {exc}") from exc
    if llm is None:
        raise Unavailable("Extraction needs an LLM: LLM_PROVIDER is empty on this server.")
    return llm


def _check_choices(*, agent: Agent, category: str | None, visibility: str | None) -> None:
    policy = policy_for_agent(agent_id=agent.id)
    allowed = policy.allowed_categories or list(DEFAULT_ALLOWED_CATEGORIES)
    if category is not None and category not in allowed:
        raise BadRequest(
            f"category '{category}' is not allowed (allowedCategories: {', '.join(allowed)}).",
            details={"limit": "allowedCategories", "allowed": allowed},
        )
    if visibility is not None and visibility not in Visibility.values:
        raise BadRequest(f"visibility must be one of {', '.join(Visibility.values)}.")


def _nothing_to_read(request: ExtractionRequest, llm: LLM, sources: Sources) -> Outcome:
    """The answer when no message asked for is left to extract (each was extracted before, or holds no
    text): no call, nothing recorded but the claim of the messages of no text read."""
    if sources.conversation is not None and sources.positions and not request.dry_run:
        with transaction.atomic():
            stored.claim(
                conversation_id=sources.conversation.pk,
                agent_id=request.agent.id,
                positions=sources.positions,
            )
    record = Extraction(
        trigger=request.trigger,
        agent=request.agent,
        user_id=request.user_id,
        conversation_id=request.conversation_id or "",
        dry_run=request.dry_run,
        status=Extraction.Status.SUCCEEDED,
        model=llm.model,
        prompt_version=PROMPT_VERSION,
        created_at=timezone.now(),
    )
    return Outcome(record)


def memory_extract(
    *,
    caller: Caller,
    user_id: str,
    messages: list[GivenMessage] | None,
    agent_id: str | None = None,
    visibility: str | None = None,
    group_ids: list[str] | None = None,
    category: str | None = None,
    conversation_id: str | None = None,
    after_message_id: str | None = None,
    message_ids: list[str] | None = None,
    dry_run: bool = False,
    turn_id: str | None = None,
    key_prefix: str | None = None,
) -> Outcome:
    """Extract the facts about ``user_id`` from ``messages``, or from the stored messages of
    ``conversation_id`` (those past what this agent extracted, past ``after_message_id``, or those of
    ``message_ids``) and add, update or leave them (see :mod:`extraction.services`). A stored message this
    agent extracted before, by any door, is left out (:mod:`extraction.stored`); those it reads are claimed
    with the writes, which moves the background's watermark past them. 409 without an LLM
    (``LLM_PROVIDER`` empty) or when a message was extracted meanwhile; 429 before the call when the agent's
    LLM budget is spent (:mod:`activity.budget`); 502 when the call fails or its answer is refused,
    recorded, and nothing changed. ``key_prefix``: the facts' place
    (:attr:`extraction.services.ExtractionRequest.key_prefix`)."""
    agent = _agent_of(caller, agent_id)
    if is_blank(user_id) or len(user_id) > 255 or text_problem(user_id):
        raise BadRequest("userId is 1 to 255 characters of storable text.")
    _check_reading(
        messages=messages,
        conversation_id=conversation_id,
        after_message_id=after_message_id,
        message_ids=message_ids,
    )
    _check_choices(agent=agent, category=category, visibility=visibility)
    _check_key_prefix(key_prefix)
    sources = _sources(
        agent=agent,
        user_id=user_id,
        messages=messages,
        conversation_id=conversation_id,
        after_message_id=after_message_id,
        message_ids=message_ids,
    )
    scope = _scope(
        visibility=visibility,
        group_ids=group_ids,
        bound=messages_bound(sources.messages),
        default=extraction_policy_for(agent_id=agent.id).extraction_visibility,
    )
    llm = _llm()
    request = ExtractionRequest(
        agent=agent,
        user_id=user_id,
        messages=sources.messages,
        scope=scope,
        category=category,
        conversation_id=conversation_id,
        dry_run=dry_run,
        turn_id=turn_id,
        key_prefix=key_prefix,
    )
    outcome = _run(request, llm, sources) if request.messages else _nothing_to_read(request, llm, sources)
    outcome.already = sources.already
    return outcome


def _run(request: ExtractionRequest, llm: LLM, sources: Sources) -> Outcome:
    """The extraction, and (unless a dry run) the claim of the stored messages it read, with its writes."""
    claim = None
    if sources.conversation is not None and sources.positions and not request.dry_run:
        claim = partial(
            stored.claim,
            conversation_id=sources.conversation.pk,
            agent_id=request.agent.id,
            positions=sources.positions,
        )
    try:
        return extraction_run(request=request, llm=llm, before_writes=claim)
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
        "skipped": record.facts_skipped,
        "messages": record.messages,
        "alreadyExtracted": outcome.already,
        "operations": [
            {**op, "entryId": publicids.public_str(publicids.ENTRY, op.get("entryId"))}
            for op in outcome.operations
        ],
    }
