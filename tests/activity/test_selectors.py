"""The task list's bound for the agent doors: :func:`activity.selectors.task_page`."""

from django.utils import timezone

from activity.models import Task
from activity.selectors import MAX_TASK_PAGE, task_page
from apikeys.caller import Caller


def test_a_task_page_holds_at_most_the_bound_whatever_the_limit(agent_a, agent_b):
    now = timezone.now()
    Task.objects.bulk_create(
        Task(creator=agent_a, assignee=agent_b, title=f"t{n}", created_at=now, updated_at=now)
        for n in range(MAX_TASK_PAGE + 5)
    )
    caller = Caller(role="agent", agent=agent_b)

    assert len(task_page(caller=caller, assignee_id="agent-b", limit=1_000)) == MAX_TASK_PAGE
    tail = task_page(caller=caller, assignee_id="agent-b", limit=1_000, offset=MAX_TASK_PAGE)
    assert len(tail) == 5
    assert task_page(caller=Caller(role="agent", agent=agent_a), assignee_id="agent-a") == []
