"""Dream fixtures: agents with Dream policies, entries with a given age, and the scripted LLM."""

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from apikeys.models import Agent
from dream.models import DreamPolicy
from tests.factories import MemoryEntryFactory, policy_set
from tests.llm_server import LLMScript, llm_server
from usermemory.models import MemoryEntry, MemoryEntryGroup


@pytest.fixture
def dream_policy(db: None) -> Callable[..., DreamPolicy]:
    """An agent's policy with Dream on (and pruning after 30 days) unless ``fields`` say otherwise, each field
    in its part's table; returns Dream's part."""

    def make(agent: Agent, **fields: Any) -> DreamPolicy:
        fields.setdefault("dream_enabled", True)
        fields.setdefault("prune_stale_after_days", 30)
        return policy_set(agent, **fields)["dream"]

    return make


@pytest.fixture
def memory(db: None) -> Callable[..., MemoryEntry]:
    """An entry owned by ``agent`` (None: an owner-less global), last updated / accessed N days ago."""

    def make(
        agent: Agent | None,
        key: str = "lang",
        value: Any = "English",
        *,
        user: str = "u1",
        visibility: str = "self",
        updated_days: float = 0,
        accessed_days: float | None = None,
        groups: list[str] | None = None,
    ) -> MemoryEntry:
        now = timezone.now()
        entry = MemoryEntryFactory(
            source_agent=agent,
            key=key,
            value=value,
            user_id=user,
            visibility=visibility,
            group_ids=groups or [],
            created_at=now - timedelta(days=updated_days + 1),
            updated_at=now - timedelta(days=updated_days),
            last_accessed_at=None if accessed_days is None else now - timedelta(days=accessed_days),
        )
        MemoryEntryGroup.objects.bulk_create(
            [MemoryEntryGroup(entry=entry, user_id=user, group_id=g) for g in groups or []]
        )
        return entry

    return make


PRICES = {"test-model": [100.0, 100.0]}  # $100 per million tokens: 1,000 in and 200 out cost $0.12


@pytest.fixture
def llm() -> Iterator[LLMScript]:
    """The scripted LLM, answers set by each test, and the LLM_* settings pointing at it."""
    script = LLMScript([])
    with llm_server(script):
        options = {
            "LLM_PROVIDER": "openai",
            "LLM_URL": script.url,
            "LLM_MODEL": "test-model",
            "LLM_PRICES": PRICES,
        }
        with override_settings(**options):
            yield script
