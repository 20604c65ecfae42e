"""Imports: memories read from a file, written through the same service as a REST upsert
(:func:`usermemory.upsert.memory_upsert`), each line as the agent it names.

What a line means (our own format, mem0's) is :mod:`usermemory.management.importlines`'s; this module runs
the lines:

- **Who writes.** Each line is written as the agent it names (``sourceAgentId``, or mem0's ``agent_id``),
  found by its id or, failing that, by its display name when exactly one agent has it; a line naming none is
  written as the default agent (``--agent``). The write is that agent's, with an agent key's rules: its
  guardrails (key and value sizes, ``allowedCategories``), its cap, its groups, the visibility rules. A line
  naming an unknown agent, or none without a default, is refused: an import never creates an agent.
- **Turns.** Each line is a turn of its own (``import:<run>:<line>``): ``maxWritesPerTurn`` bounds what an
  LLM writes in one conversation turn, and an import is not one; every other guardrail applies.
- **Idempotent on (user, key, agent).** A line whose entry already holds what it says is *skipped* (nothing
  written, no history event: ``skip_unchanged``); a line that changes it is *written* (an update, with its
  history event). A second line of the same file on the same upsert key (user and key; and the agent, for
  ``self``/``group``) is *refused*, naming the first: otherwise each run would write both, and a second run
  would not be a no-op.
- **Time order.** A line observed (its ``observedAt``, else the import's time) before the stored value on its
  key was is not written, and is reported with both times (:attr:`ImportReport.older`): an old export
  imported again does not write over what was learned since.
- **Refused** lines (a rule refused them) are reported with their number and reason; the import goes on.
- **Malformed** lines (:class:`MalformedLine`, raised while the lines are read) stop the import: the lines
  before it are committed, nothing of it or after is written.
- **Batches.** Lines are committed ``batch_size`` at a time (their vectors scheduled after the commit as one
  batch's, as :func:`usermemory.upsert.memory_upsert_batch` does), each line in a savepoint of the batch's
  transaction, so a refused line leaves nothing and a batch never holds half a line. The batch takes its
  users' locks in one order first, as :func:`usermemory.upsert.memory_upsert_batch` does, so two imports (or
  an import and a batch upsert) never deadlock. A dry run does all of it and rolls each batch back.
"""

import hashlib
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from django.db import transaction

from apikeys.caller import Caller
from apikeys.models import Agent, ApiKey
from memoryplatform.errors import ServiceError
from memoryplatform.locks import LockId, advisory_xact_lock
from usermemory.embedding import embeddings_schedule, embeddings_waiting
from usermemory.models import Visibility
from usermemory.upsert import MemoryWrite, memory_upsert

DEFAULT_BATCH_SIZE = 100
MAX_BATCH_SIZE = 1000


class MalformedLine(Exception):
    """A line that is not a memory in the format read: not JSON, not an object, a required field missing or
    of the wrong type. The import stops at it."""

    def __init__(self, number: int, reason: str) -> None:
        super().__init__(f"line {number}: {reason}")
        self.number = number
        self.reason = reason


@dataclass(frozen=True)
class ImportLine:
    """One line read: the write it asks for, as the agent it names (``agent``: an id or a display name;
    ``None``: the default agent), and what its history event records of where it came from."""

    number: int
    write: MemoryWrite
    agent: str | None
    provenance: dict[str, Any]


@dataclass(frozen=True)
class Refusal:
    """A refused line: its number, the refusal's code (the error envelope's) and reason. A reader yields one
    for a line it refuses itself (a field over its size, say): reported, never written."""

    number: int
    code: str
    reason: str


@dataclass
class ImportReport:
    read: int = 0
    created: int = 0
    updated: int = 0
    skipped: int = 0
    refused: list[Refusal] = field(default_factory=list)
    older: list[Refusal] = field(default_factory=list)  # time order: the stored value was observed later
    malformed: MalformedLine | None = None
    dry_run: bool = False
    vectors_pending: int = 0  # entries written and still waiting for their vector when their batch ended

    @property
    def written(self) -> int:
        return self.created + self.updated


@dataclass
class _Run:
    """What one import keeps between its batches: the agents found by name, the upsert keys written."""

    default_agent: str | None
    dry_run: bool
    run_id: str
    report: ImportReport
    agents: dict[str, Agent | Refusal] = field(default_factory=dict)
    keys: dict[bytes, int] = field(default_factory=dict)  # upsert key digest -> the line that set it
    written_ids: list[int] = field(default_factory=list)  # the batch's entries written, for their vectors

    def caller_for(self, line: ImportLine) -> Caller | Refusal:
        name = line.agent or self.default_agent
        if not name:
            return Refusal(
                line.number, "bad_request", "names no agent (sourceAgentId), and --agent is not given."
            )
        if name not in self.agents:
            self.agents[name] = _find_agent(name)
        found = self.agents[name]
        if isinstance(found, Refusal):
            return replace(found, number=line.number)
        return Caller(role=ApiKey.Role.AGENT, agent=found)

    def earlier_line(self, line: ImportLine, agent_id: str) -> tuple[bytes, Refusal | None]:
        """The line's upsert key (a digest: an import of millions of lines keeps 16 bytes a key), and the
        refusal of a second line on a key an earlier line of this import wrote or skipped."""
        write = line.write
        is_global = write.visibility == Visibility.GLOBAL
        parts = (write.user_id, write.key, "global" if is_global else f"owned:{agent_id}")
        digest = hashlib.blake2b("\x00".join(parts).encode("utf-8", "surrogatepass"), digest_size=16).digest()
        first = self.keys.get(digest)
        if first is None:
            return digest, None
        what = "user and key (a global memory)" if is_global else f"user, key and agent '{agent_id}'"
        return digest, Refusal(
            line.number, "conflict", f"line {first} of this file already sets this {what}."
        )


def _find_agent(name: str) -> Agent | Refusal:
    """The agent of this id, else the one agent of this display name (policy read with it)."""
    agents = Agent.objects.select_related("memory_policy")
    by_id = agents.filter(id=name).first()
    if by_id is not None:
        return by_id
    named = list(agents.filter(display_name=name)[:2])
    if len(named) == 1:
        return named[0]
    if named:
        return Refusal(0, "bad_request", f"more than one agent is named '{name}': give its id.")
    return Refusal(0, "not_found", f"no agent '{name}' (by id or name): an import creates no agent.")


def _write_line(run: _Run, line: ImportLine) -> None:
    caller = run.caller_for(line)
    if isinstance(caller, Refusal):
        run.report.refused.append(caller)
        return
    agent_id = caller.acting_agent_id
    upsert_key, duplicate = run.earlier_line(line, agent_id)
    if duplicate is not None:
        run.report.refused.append(duplicate)
        return
    write = replace(line.write, source_agent_id=agent_id, provenance=line.provenance)
    try:
        result = memory_upsert(
            caller=caller,
            write=write,
            turn_id=f"import:{run.run_id}:{line.number}",
            skip_unchanged=True,
            schedule_vectors=False,  # the batch's, at once: _run_batch
        )
    except ServiceError as exc:
        run.report.refused.append(Refusal(line.number, exc.code, exc.message))
        return
    run.keys[upsert_key] = line.number
    if result.unchanged:
        run.report.skipped += 1
        return
    if result.skipped is not None:
        run.report.older.append(Refusal(line.number, "skipped", result.skipped.reason))
        return
    run.written_ids.append(result.entry.id)
    if result.created:
        run.report.created += 1
    else:
        run.report.updated += 1


def _run_batch(run: _Run, batch: list[ImportLine | Refusal]) -> None:
    lines = [line for line in batch if isinstance(line, ImportLine)]
    run.written_ids = []
    with transaction.atomic():
        for user_id in sorted({line.write.user_id for line in lines}):  # one lock order: no deadlock
            advisory_xact_lock(LockId.USER_MEMORY, user_id)
        for line in batch:
            if isinstance(line, Refusal):
                run.report.refused.append(line)
            else:
                _write_line(run, line)  # memory_upsert's own atomic block: a savepoint of the batch
        if run.dry_run:
            transaction.set_rollback(True)
        else:
            embeddings_schedule(entry_ids=run.written_ids)  # after the batch commits, as a batch upsert
    if not run.dry_run:
        run.report.vectors_pending += embeddings_waiting(entry_ids=run.written_ids)
    run.report.read += len(batch)


def _next_batch(
    lines: Iterator[ImportLine | Refusal], size: int
) -> tuple[list[ImportLine | Refusal], MalformedLine | None]:
    batch: list[ImportLine | Refusal] = []
    try:
        for line in lines:
            batch.append(line)
            if len(batch) >= size:
                break
    except MalformedLine as exc:
        return batch, exc
    return batch, None


def memory_import(
    *,
    lines: Iterable[ImportLine | Refusal],
    default_agent: str | None = None,
    dry_run: bool = False,
    batch_size: int = DEFAULT_BATCH_SIZE,
    on_batch: Callable[[ImportReport], None] | None = None,
) -> ImportReport:
    """Write ``lines`` (read lazily; a :class:`MalformedLine` raised while reading them stops the import,
    after the lines before it are committed) and report what each did. ``on_batch``: called after each
    committed batch, with the report so far (progress)."""
    if not 1 <= batch_size <= MAX_BATCH_SIZE:
        raise ValueError(f"batch_size must be from 1 to {MAX_BATCH_SIZE}.")
    report = ImportReport(dry_run=dry_run)
    run = _Run(default_agent=default_agent, dry_run=dry_run, run_id=uuid.uuid4().hex[:12], report=report)
    iterator = iter(lines)
    while True:
        batch, malformed = _next_batch(iterator, batch_size)
        if batch:
            _run_batch(run, batch)
            if on_batch is not None:
                on_batch(report)
        if malformed is not None:
            report.malformed = malformed
            return report
        if len(batch) < batch_size:
            return report
