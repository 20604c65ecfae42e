"""Activity's part of an agent's policy (:class:`activity.models.ActivityPolicy`: the tool-call log's
retention and the LLM budget), registered with usermemory's (:mod:`usermemory.policies`) so that REST, the
admin and the policy service show and write it with the agent's other settings."""

from activity.models import ActivityPolicy
from usermemory.policies import PolicyPart

ACTIVITY_POLICY = PolicyPart(
    name="activity",
    model=ActivityPolicy,
    groups=(("Activity", ("tool_call_retention_days",)), ("LLM", ("llm_budget",))),
    rest="activity.api.policy.policy_fields",
)
