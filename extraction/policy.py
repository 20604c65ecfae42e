"""Extraction's part of an agent's policy (:class:`extraction.models.ExtractionPolicy`), registered with
usermemory's (:mod:`usermemory.policies`) so that REST, the admin and the policy service show and write it
with the agent's other settings."""

from extraction.models import ExtractionPolicy
from memoryplatform.errors import BadRequest
from usermemory.models import Visibility
from usermemory.policies import PolicyPart
from usermemory.selectors import policy_row


def check_extraction_policy(policy: ExtractionPolicy) -> None:
    if policy.extraction_visibility not in Visibility.values:
        raise BadRequest(f"extraction visibility must be one of {', '.join(Visibility.values)}.")


EXTRACTION_POLICY = PolicyPart(
    name="extraction",
    model=ExtractionPolicy,
    groups=(
        (
            "Extraction",
            ("extract_from_conversations", "max_extraction_cost_per_run", "extraction_visibility"),
        ),
    ),
    check=check_extraction_policy,
    rest="extraction.api.policy.policy_fields",
)


def extraction_policy_for(*, agent_id: str) -> ExtractionPolicy:
    """The agent's extraction settings, or the defaults (unsaved) when it has none."""
    return policy_row(ExtractionPolicy, agent_id=agent_id)
