"""The rules through the services: sequence numbers, the case log under concurrent writers (PostgreSQL)."""

import threading

import pytest
from django.db import connection

from apikeys.caller import Caller
from conversations import selectors, services
from conversations.models import Conversation, Message
from memoryplatform.errors import BadRequest, Forbidden, NotFound
from tests.factories import AgentFactory, AgentGroupFactory


def write(channel: str = "summary", role: str = "assistant", text: str = "x") -> services.MessageWrite:
    return services.MessageWrite(
        channel=channel, role=role, content=[{"type": "text", "text": text}], session_id="s"
    )


def agent_caller(agent_id: str) -> Caller:
    return Caller(role="agent", agent=AgentFactory(id=agent_id))


@pytest.mark.django_db
def test_sequence_numbers_are_per_scope_and_gapless_positions_per_conversation():
    """``seq`` counts one scope (a shared channel, or one agent's memory stream); ``position`` the whole
    conversation, in the order written (issue 44, finding 12)."""
    caller, other = agent_caller("writer"), agent_caller("other")
    one = services.conversation_create(caller=caller, user_id="u")
    two = services.conversation_create(caller=caller, user_id="u")
    services.message_append(caller=caller, conversation_id=str(one.id), writes=[write(), write()])
    services.message_append(caller=caller, conversation_id=str(two.id), writes=[write()])
    mixed = [write(channel="history"), write(channel="memory"), write(channel="history"), write()]
    services.message_append(caller=caller, conversation_id=str(one.id), writes=mixed)
    services.message_append(caller=other, conversation_id=str(one.id), writes=[write(channel="memory")] * 2)
    rows = Message.objects.filter(conversation=one).order_by("position")
    assert list(rows.values_list("position", "channel", "agent_id", "seq")) == [
        (1, "summary", "writer", 1),
        (2, "summary", "writer", 2),
        (3, "history", "writer", 1),
        (4, "memory", "writer", 1),
        (5, "history", "writer", 2),
        (6, "summary", "writer", 3),
        (7, "memory", "other", 1),
        (8, "memory", "other", 2),
    ]
    assert list(Message.objects.filter(conversation=two).values_list("seq", "position")) == [(1, 1)]
    one.refresh_from_db()
    assert one.next_position == 9


@pytest.mark.django_db
def test_service_rules_hold_without_the_rest_door():
    member = agent_caller("member")
    outsider = agent_caller("outsider")
    AgentGroupFactory(id="crew", members=[member.agent])
    conversation = services.conversation_create(caller=member, user_id="u", group_id="crew")
    with pytest.raises(NotFound):  # issue 33: an outsider sees no such conversation (was 403)
        services.message_append(caller=outsider, conversation_id=str(conversation.id), writes=[write()])
    with pytest.raises(BadRequest):
        services.message_append(caller=member, conversation_id=str(conversation.id), writes=[write()] * 21)
    with pytest.raises(Forbidden):
        services.message_append(
            caller=Caller(role="viewer"), conversation_id=str(conversation.id), writes=[write()]
        )
    assert Message.objects.count() == 0


WRITERS = 6
PER_WRITER = 25


@pytest.mark.django_db(transaction=True)
def test_reader_polling_the_case_log_misses_no_entry_under_concurrent_writers():
    """Writers append to one case log while a reader polls ``after=<checkpoint>`` and advances it."""
    agents = [AgentFactory(id=f"writer-{i}") for i in range(WRITERS)]
    reader = Caller(role="agent", agent=AgentFactory(id="reader"))
    conversation = services.conversation_create(caller=reader, user_id="u")
    conversation_id = str(conversation.id)
    start = threading.Barrier(WRITERS + 1)
    errors: list[BaseException] = []

    def writer(agent_index: int) -> None:
        caller = Caller(role="agent", agent=agents[agent_index])
        try:
            start.wait()
            for n in range(PER_WRITER):
                batch = [write(text=f"{agent_index}:{n}:{k}") for k in range(1 + n % 3)]
                services.message_append(caller=caller, conversation_id=conversation_id, writes=batch)
        except BaseException as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    start.wait()

    seen: list[Message] = []
    checkpoint: str | None = None

    def poll() -> None:
        nonlocal checkpoint
        while True:
            qs = selectors.message_list(
                caller=reader, conversation=conversation, channel="summary", after=checkpoint
            )
            page = selectors.page_of(qs, limit=7)
            if not page.items:
                return
            seen.extend(page.items)
            checkpoint = str(page.items[-1].id)
            services.checkpoint_set(caller=reader, conversation_id=conversation_id, last_entry_id=checkpoint)

    while any(thread.is_alive() for thread in threads):
        poll()
    for thread in threads:
        thread.join()
    poll()

    assert not errors, errors
    expected = Message.objects.filter(conversation_id=conversation_id).count()
    assert expected == WRITERS * sum(1 + n % 3 for n in range(PER_WRITER))
    seqs = [m.seq for m in seen]
    assert len(seqs) == len(set(seqs)), "duplicates"
    assert seqs == list(range(1, expected + 1)), "a gap or out of order"
    # Each writer's entries came in its own order.
    for i in range(WRITERS):
        mine = [m.content[0]["text"] for m in seen if m.agent_id == f"writer-{i}"]
        assert mine == [f"{i}:{n}:{k}" for n in range(PER_WRITER) for k in range(1 + n % 3)]
    assert Conversation.objects.get(id=conversation_id).next_position == expected + 1
