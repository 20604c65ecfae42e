"""The authenticated caller of an API request, whichever door it came through."""

from dataclasses import dataclass, field
from typing import Any

from apikeys.models import Agent, ApiKey


@dataclass(frozen=True)
class Caller:
    """Who is calling: a role, and for an ``agent`` key the agent it acts as.

    DRF puts this in ``request.user``. Staff signed in to the admin act as ``admin`` with no key.
    """

    role: str
    agent: Agent | None = None
    key: ApiKey | None = None
    user: Any = field(default=None, compare=False)

    is_authenticated = True
    is_anonymous = False

    @property
    def is_agent(self) -> bool:
        return self.role == ApiKey.Role.AGENT

    @property
    def is_admin(self) -> bool:
        return self.role == ApiKey.Role.ADMIN

    @property
    def agent_id(self) -> str | None:
        return self.agent.id if self.agent else None

    @property
    def acting_agent_id(self) -> str:
        """The agent an ``agent`` key acts as: asked only of an agent caller, whose key always names one."""
        if self.agent is None:
            raise TypeError(f"A {self.role} caller acts as no agent.")
        return self.agent.id

    @property
    def pk(self) -> str:
        """A stable identity for throttling caches."""
        if self.key is not None:
            return f"key:{self.key.prefix}"
        return f"user:{getattr(self.user, 'pk', '')}"

    @property
    def provider_share(self) -> str:
        """Whose share of provider calls this caller's count against (memoryplatform.providercalls): its
        agent's, or its key's when it acts as none."""
        if self.agent is not None:
            return f"agent:{self.agent.id}"
        return f"key:{self.key.pk}" if self.key is not None else f"staff:{getattr(self.user, 'pk', '?')}"

    def log_label(self) -> str:
        """How request logs name the caller: never the key, only its prefix."""
        who = f"agent:{self.agent.id}" if self.agent else self.role
        if self.key is not None:
            return f"{who} key={self.key.prefix}"
        return f"{who} staff={getattr(self.user, 'username', '?')}"

    @classmethod
    def for_key(cls, key: ApiKey) -> "Caller":
        return cls(role=key.role, agent=key.agent, key=key)

    @classmethod
    def for_staff(cls, user: Any) -> "Caller":
        return cls(role=ApiKey.Role.ADMIN, user=user)
