"""Writes for agents, groups and API keys. Views, the admin and commands only call these."""

import secrets
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Case, F, Prefetch, Q, Value, When, prefetch_related_objects
from django.utils import timezone

from apikeys import keycache, store
from apikeys.caller import Caller
from apikeys.keys import digest_matches, key_generate, key_parse
from apikeys.models import Agent, AgentGroup, ApiKey
from memoryplatform.errors import BadRequest, Conflict, Forbidden, NotFound
from memoryplatform.store import instances_from_rows

AGENT_EDITABLE_FIELDS = ("display_name", "capabilities", "model", "status")
RESERVED_AGENT_IDS = frozenset({"me"})


def caller_require_writer(caller: Caller) -> None:
    """Every write, at every door (REST, batch, properties, LLM tools, MCP, conversations), starts here: a
    viewer key only reads, and so does the key of an agent whose status is ``unavailable`` until an admin
    makes it ``active`` or ``idle`` again. Reads stay open to it."""
    if not (caller.is_agent or caller.is_admin):
        raise Forbidden(f"A {caller.role} key may only read.")
    agent = caller.agent
    if agent is not None and agent.status == Agent.Status.UNAVAILABLE:
        raise Forbidden(
            f"Agent '{agent.id}' is unavailable: its status is '{agent.status}', so its key may read but not "
            "write. An admin makes it active again (PATCH /v1/agents/{id} with a status).",
            details={"agentId": agent.id, "status": agent.status},
        )


def _validate(instance: Agent | AgentGroup | ApiKey, *, exclude: list[str] | None = None) -> None:
    try:
        instance.full_clean(exclude=exclude, validate_unique=False, validate_constraints=False)
    except ValidationError as exc:
        field, messages = next(iter(exc.message_dict.items()))
        raise BadRequest(f"{field}: {messages[0]}", details={"fields": exc.message_dict}) from exc


def _validate_capabilities(capabilities: Any) -> list[str]:
    if not isinstance(capabilities, list) or not all(isinstance(c, str) for c in capabilities):
        raise BadRequest("capabilities must be a list of strings.")
    return capabilities


@transaction.atomic
def group_ensure(*, group_id: str, name: str = "") -> AgentGroup:
    """The group with this id, created if it does not exist yet (safe under concurrency)."""
    _validate(AgentGroup(id=group_id, name=name), exclude=["members"])
    group, _ = AgentGroup.objects.get_or_create(id=group_id, defaults={"name": name})
    return group


@transaction.atomic
def agent_create(
    *,
    agent_id: str,
    display_name: str = "",
    capabilities: list[str] | None = None,
    model: str = "",
    status: str = Agent.Status.ACTIVE,
    group_ids: list[str] | tuple[str, ...] = (),
) -> Agent:
    """Register an agent, and any group it names that does not exist yet. 409 if the id is taken."""
    if agent_id in RESERVED_AGENT_IDS:
        raise BadRequest(f"'{agent_id}' is reserved and cannot be an agent id.")
    agent = Agent(
        id=agent_id,
        display_name=display_name,
        capabilities=_validate_capabilities(capabilities or []),
        model=model,
        status=status,
    )
    _validate(agent, exclude=["last_active_at"])
    try:
        with transaction.atomic():
            agent.save(force_insert=True)
    except IntegrityError as exc:
        raise Conflict(f"Agent '{agent_id}' already exists.") from exc
    for group_id in group_ids:
        group_ensure(group_id=group_id).members.add(agent)
    return agent


@transaction.atomic
def agent_update(*, agent_id: str, **changes: Any) -> Agent:
    """Change an agent's directory fields, under a row lock."""
    unknown = set(changes) - set(AGENT_EDITABLE_FIELDS)
    if unknown:
        raise BadRequest(f"Unknown agent fields: {', '.join(sorted(unknown))}.")
    agent = Agent.objects.select_for_update().filter(id=agent_id).first()
    if agent is None:
        raise NotFound(f"No agent '{agent_id}'.")
    if "capabilities" in changes:
        _validate_capabilities(changes["capabilities"])
    for name, value in changes.items():
        setattr(agent, name, value)
    _validate(agent, exclude=["last_active_at"])
    agent.save(update_fields=[*changes, "updated_at"])
    return agent


@transaction.atomic
def group_add_members(*, group_id: str, agent_ids: list[str]) -> AgentGroup:
    group = AgentGroup.objects.filter(id=group_id).first()
    if group is None:
        raise NotFound(f"No group '{group_id}'.")
    agents = list(Agent.objects.filter(id__in=agent_ids))
    missing = sorted(set(agent_ids) - {a.id for a in agents})
    if missing:
        raise BadRequest(f"Unknown agents: {', '.join(missing)}.", details={"unknownAgents": missing})
    group.members.add(*agents)
    return group


@transaction.atomic
def agent_set_groups(*, agent_id: str, group_ids: list[str]) -> None:
    """Make the agent a member of exactly these (existing) groups."""
    agent = Agent.objects.select_for_update().filter(id=agent_id).first()
    if agent is None:
        raise NotFound(f"No agent '{agent_id}'.")
    groups = list(AgentGroup.objects.filter(id__in=group_ids))
    missing = sorted(set(group_ids) - {g.id for g in groups})
    if missing:
        raise BadRequest(f"Unknown groups: {', '.join(missing)}.")
    agent.groups.set(groups)


@transaction.atomic
def group_remove_member(*, group_id: str, agent_id: str) -> None:
    group = AgentGroup.objects.filter(id=group_id).first()
    if group is None:
        raise NotFound(f"No group '{group_id}'.")
    member = group.members.filter(id=agent_id).first()
    if member is None:
        raise NotFound(f"Agent '{agent_id}' is not a member of group '{group_id}'.")
    group.members.remove(member)


def apikey_check_options(*, role: str, agent_id: str | None, expires_at: datetime | None) -> Agent | None:
    """Refuse a key that could not be made: an unknown role, an agent key without its agent (or another role
    with one), an unknown agent, or an expiry in the past. Returns the agent for an agent key."""
    if role not in ApiKey.Role.values:
        raise BadRequest(f"role must be one of {', '.join(ApiKey.Role.values)}.")
    if role == ApiKey.Role.AGENT and not agent_id:
        raise BadRequest("An agent key needs an agent.")
    if role != ApiKey.Role.AGENT and agent_id:
        raise BadRequest(f"A {role} key is not bound to an agent.")
    if expires_at is not None and expires_at <= timezone.now():
        raise BadRequest("expires_at must be in the future.")
    if not agent_id:
        return None
    agent = Agent.objects.filter(id=agent_id).first()
    if agent is None:
        raise NotFound(f"No agent '{agent_id}'.")
    return agent


def apikey_create(
    *,
    role: str,
    agent_id: str | None = None,
    label: str = "",
    expires_at: datetime | None = None,
    created_by: Any = None,
) -> tuple[ApiKey, str]:
    """Make a key and return it with its raw form, which is never stored and cannot be shown again."""
    agent = apikey_check_options(role=role, agent_id=agent_id, expires_at=expires_at)
    for _ in range(5):  # an 8-hex prefix collides about once in four billion keys
        raw_key, prefix = key_generate()
        parsed = key_parse(raw_key)
        assert parsed is not None  # noqa: S101  (key_generate makes keys key_parse accepts)
        try:
            with transaction.atomic():
                key = ApiKey.objects.create(
                    prefix=prefix,
                    digest=parsed.digest,
                    role=role,
                    agent=agent,
                    label=label,
                    expires_at=expires_at,
                    created_by=created_by,
                )
        except IntegrityError:
            continue
        return key, raw_key
    raise Conflict("Could not allocate a unique key prefix; try again.")


def apikey_revoke(*, prefix: str) -> ApiKey:
    """Revoke a key by its prefix. Revoking twice keeps the first revocation time."""
    updated = ApiKey.objects.filter(prefix=prefix, revoked_at__isnull=True).update(revoked_at=timezone.now())
    keycache.forget_all()
    key = ApiKey.objects.filter(prefix=prefix).first()
    if key is None:
        raise NotFound(f"No API key with prefix '{prefix}'.")
    if not updated:
        raise Conflict(f"API key '{prefix}' was already revoked.")
    return key


class KeyRefused(Exception):
    """A presented key that does not authenticate; the message is safe to show to the caller."""


def apikey_authenticate(*, raw_key: str) -> ApiKey:
    """The live key for a raw key, or :class:`KeyRefused`. Touches last-used times at most once a window.

    The key cache (:mod:`apikeys.keycache`) keeps the key as built from its lookup row, with its agent and
    the agent's policy, so a request that finds it builds nothing (5-9 % of a hot request's CPU,
    ``bench/RESULTS.md`` session 12). Any change to a key, an agent or a policy empties the cache, so a kept
    key is the database's; what changes with time alone (expiry) and the presented digest are checked on
    every request. Requests share a kept key and only read it; the one write, :func:`_touch`, sets the
    last-used times the database now holds and drops the key, so the next request reads it again."""
    parsed = key_parse(raw_key.strip())
    if parsed is None:
        raise KeyRefused("Invalid API key.")
    cached = keycache.usable()
    generation = keycache.ROWS.generation
    key: ApiKey | None = keycache.ROWS.get(parsed.prefix) if cached else None
    if key is None:
        keycache.lookups.labels("database").inc()
        row = store.key_lookup(prefix=parsed.prefix)
        key = _key_from_row(row) if row is not None else None
        if key is not None and cached:
            keycache.ROWS.put(parsed.prefix, key, generation=generation)
    else:
        keycache.lookups.labels("cache").inc()
    if key is None or not digest_matches(parsed.digest, key.digest):
        raise KeyRefused("Invalid API key.")
    now = timezone.now()
    if key.revoked_at is not None:
        raise KeyRefused("API key has been revoked.")
    if key.expires_at is not None and key.expires_at <= now:
        raise KeyRefused("API key has expired.")
    if _touch(key, now) and cached:
        keycache.ROWS.forget(parsed.prefix)  # read again next time, with the new last-used times
    return key


def _instance(columns: store.ModelColumns, values: tuple[Any, ...]) -> Any:
    """A model instance as loaded from the database (:func:`memoryplatform.store.instances_from_rows`)."""
    return instances_from_rows(columns.model, columns.model._meta.concrete_fields, [values])[0]


def _key_from_row(row: store.KeyLookupRow) -> ApiKey:
    """The key of a lookup row, with its agent and the agent's memory policy loaded."""
    key_columns, agent_columns, policy_columns = store.lookup_columns()
    key: ApiKey = _instance(key_columns, row.key)
    if row.agent is None:
        return key
    agent: Agent = _instance(agent_columns, row.agent)
    if row.policy is not None:
        agent.memory_policy = _instance(policy_columns, row.policy)
    else:  # known absent, as select_related records a missing reverse one-to-one: no query to find out
        # Prefetching from an empty queryset caches "none" for the accessor and, as none() promises, runs no
        # query. Django has no public call that caches an absent reverse one-to-one directly; this one costs
        # about 0.2 ms of CPU (building the empty query), against 8 us for the field cache's own setter.
        nothing = policy_columns.model._default_manager.none()
        prefetch_related_objects([agent], Prefetch("memory_policy", queryset=nothing))
    key.agent = agent
    return key


def _touch(key: ApiKey, now: datetime) -> bool:
    """Record use cheaply: a compare-and-set write only when the stored time is older than the window.
    ``True`` when it wrote."""
    threshold = now - timedelta(seconds=settings.API_KEY_TOUCH_INTERVAL)
    wrote = False
    if key.last_used_at is None or key.last_used_at < threshold:
        wrote = True
        ApiKey.objects.filter(Q(last_used_at__isnull=True) | Q(last_used_at__lt=threshold), pk=key.pk).update(
            last_used_at=now
        )
        key.last_used_at = now
    agent = key.agent
    if agent is not None and (agent.last_active_at is None or agent.last_active_at < threshold):
        # Use makes an idle agent active again (an unavailable one stays so: that is the admins' call).
        Agent.objects.filter(
            Q(last_active_at__isnull=True) | Q(last_active_at__lt=threshold), pk=agent.pk
        ).update(
            last_active_at=now,
            status=Case(When(status=Agent.Status.IDLE, then=Value(Agent.Status.ACTIVE)), default=F("status")),
        )
        agent.last_active_at = now
        if agent.status == Agent.Status.IDLE:
            agent.status = Agent.Status.ACTIVE
        wrote = True
    return wrote


def agents_mark_idle(*, now: datetime) -> int:
    """Mark ``idle`` the active agents whose key has not been used for ``AGENT_IDLE_AFTER`` seconds (one
    set-based update; Dream runs it each cycle). Returns how many changed. An agent never used stays as it
    is; its next request makes an idle agent active again (:func:`_touch`)."""
    cutoff = now - timedelta(seconds=settings.AGENT_IDLE_AFTER)
    return Agent.objects.filter(status=Agent.Status.ACTIVE, last_active_at__lt=cutoff).update(
        status=Agent.Status.IDLE
    )


class BootstrapResult(NamedTuple):
    username: str
    created: bool
    password: str | None
    raw_key: str | None


@transaction.atomic
def bootstrap_first_admin(*, username: str, password: str | None = None) -> BootstrapResult:
    """Make sure a staff superuser and a first admin key exist.

    Only the run that creates the superuser (the unique username decides, not a check) makes the key,
    so a second run makes no second admin and no second key.
    """
    user_model = get_user_model()
    user, created = user_model.objects.get_or_create(
        username=username, defaults={"is_staff": True, "is_superuser": True}
    )
    if not created:
        return BootstrapResult(username=username, created=False, password=None, raw_key=None)
    password = password or secrets.token_urlsafe(12)
    user.set_password(password)
    user.save(update_fields=["password"])
    _, raw_key = apikey_create(role=ApiKey.Role.ADMIN, label="first admin key (bootstrap)", created_by=user)
    return BootstrapResult(username=username, created=True, password=password, raw_key=raw_key)
