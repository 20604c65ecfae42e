"""What Dream holds of a user, for GDPR erasure and export: its runs' records.

A run's ``details`` keep, per group summarised, the user's id and the key and value of each source entry
(other agents' ``self`` entries included) with the LLM's summaries; the groups that failed, by user; the
entry ids of the contradictions by meaning; and a failed run's ``error`` may name the user. Erasure removes
all of it, in the erasure's transaction (the app registers with ``usermemory.services.register_user_data``,
and erasure calls it before it deletes the entries, so the user's entry ids are still known), and leaves
counts of what it removed. The export lists it.

A cycle still running holds its records in memory until it finishes: the eraser locks the running runs'
rows, and a finishing run (:func:`drop_erased`) drops the users erased since it started, under its own row
lock, so a record is never written back after its user's erasure.
"""

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import BooleanField, F, Func, JSONField, Q, QuerySet, Value

from dream.models import DreamRun
from dream.store import key_vectors_forget_user
from usermemory.export import iso
from usermemory.models import MemoryEntry, MemoryEvent

ERASED_ERROR = "(the rest of this error named a user since erased, and was removed)"


def _pairs_name(entry_ids: list[int]) -> Func:
    """The run's contradictions by meaning hold one of ``entry_ids`` (a jsonpath match: one statement)."""
    return Func(
        F("details"),
        Value("$.meaning.pairs[*][*] ? (@ == $ids[*])"),
        Value({"ids": entry_ids}, output_field=JSONField()),
        function="jsonb_path_exists",
        output_field=BooleanField(),
    )


def _runs_holding(user_id: str, entry_ids: list[int]) -> QuerySet[DreamRun]:
    """The runs whose records name the user: a proposal or failure of theirs, an error with their id, or a
    pair of their entries."""
    named = (
        Q(details__summaries__proposals__contains=[{"userId": user_id}])
        | Q(details__summaries__failures__contains=[{"userId": user_id}])
        | Q(error__contains=user_id)
    )
    if entry_ids:
        named |= Q(pairs_name=True)
        return DreamRun.objects.alias(pairs_name=_pairs_name(entry_ids)).filter(named)
    return DreamRun.objects.filter(named)


def _user_entry_ids(user_id: str) -> list[int]:
    return list(MemoryEntry.objects.filter(user_id=user_id).order_by("id").values_list("id", flat=True))


def _without(
    details: dict[str, Any], *, users: set[str], entry_ids: set[int]
) -> tuple[dict[str, Any], dict[str, int]]:
    """``details`` without the proposals and failures of ``users`` and the pairs holding ``entry_ids``;
    and how many of each it removed."""
    details = json.loads(json.dumps(details))  # a deep copy of plain JSON
    removed = {"proposals": 0, "failures": 0, "pairs": 0}
    summaries = details.get("summaries")
    if isinstance(summaries, dict):
        for name in ("proposals", "failures"):
            kept = [item for item in summaries.get(name, []) if item.get("userId") not in users]
            removed[name] = len(summaries.get(name, [])) - len(kept)
            summaries[name] = kept
    meaning = details.get("meaning")
    if isinstance(meaning, dict) and entry_ids:
        kept_pairs = [p for p in meaning.get("pairs", []) if not entry_ids.intersection(p)]
        removed["pairs"] = len(meaning.get("pairs", [])) - len(kept_pairs)
        meaning["pairs"] = kept_pairs
    if any(removed.values()):
        erased = details.setdefault("erased", {})
        for name, count in removed.items():
            erased[name] = erased.get(name, 0) + count
    return details, removed


def _error_without(error: str, user_id: str) -> str:
    """An error that names the user keeps its exception's name only."""
    if user_id not in error:
        return error
    return f"{error.split(':', 1)[0]}: {ERASED_ERROR}"


@transaction.atomic
def dream_erase_user(user_id: str) -> dict[str, int]:
    """GDPR erasure's part here: the user's proposals (their entries' keys and values, the summaries),
    failures, pairs and errors, removed from every run's records; and the key vectors of the keys only this
    user holds. Runs before the entries are deleted."""
    key_vectors = key_vectors_forget_user(user_id=user_id)
    entry_ids = _user_entry_ids(user_id)
    runs = list(
        DreamRun.objects.select_for_update()
        .filter(Q(pk__in=_runs_holding(user_id, entry_ids).values("pk")) | Q(status=DreamRun.Status.RUNNING))
        .order_by("pk")
    )
    total = {
        "runsScrubbed": 0,
        "proposalsRemoved": 0,
        "failuresRemoved": 0,
        "pairsRemoved": 0,
        "keyVectorsRemoved": key_vectors,
    }
    for run in runs:
        details, removed = _without(run.details, users={user_id}, entry_ids=set(entry_ids))
        error = _error_without(run.error, user_id)
        if not any(removed.values()) and error == run.error:
            continue
        DreamRun.objects.filter(pk=run.pk).update(details=details, error=error)
        total["runsScrubbed"] += 1
        total["proposalsRemoved"] += removed["proposals"]
        total["failuresRemoved"] += removed["failures"]
        total["pairsRemoved"] += removed["pairs"]
    return total


def drop_erased(*, details: dict[str, Any], since: datetime) -> dict[str, Any]:
    """A finishing run's ``details`` without the users erased since it started (``since``). Call it under
    the run's row lock, which the eraser takes too."""
    named = {
        item["userId"]
        for name in ("proposals", "failures")
        for item in details.get("summaries", {}).get(name, [])
        if item.get("userId")
    }
    if not named:
        return details
    erased = set(
        MemoryEvent.objects.filter(
            action=MemoryEvent.Action.ERASED, user_id__in=sorted(named), created_at__gte=since
        ).values_list("user_id", flat=True)
    )
    return _without(details, users=erased, entry_ids=set())[0] if erased else details


def _mine(items: Iterable[dict[str, Any]], user_id: str) -> list[dict[str, Any]]:
    return [item for item in items if item.get("userId") == user_id]


def dream_export_user(user_id: str) -> dict[str, Any]:
    """GDPR export's part here: per run that names the user, their proposals (sources and summaries),
    failures, pairs of their entries and an error naming them, in the export's own format."""
    entry_ids = _user_entry_ids(user_id)
    mine = set(entry_ids)
    runs = []
    for run in _runs_holding(user_id, entry_ids).order_by("started_at", "pk"):
        summaries = run.details.get("summaries", {})
        pairs = run.details.get("meaning", {}).get("pairs", [])
        runs.append(
            {
                "runId": run.pk,
                "startedAt": iso(run.started_at),
                "status": run.status,
                "dryRun": run.dry_run,
                "proposals": _mine(summaries.get("proposals", []), user_id),
                "failures": _mine(summaries.get("failures", []), user_id),
                "meaningPairs": [p for p in pairs if mine.intersection(p)],
                "error": run.error if user_id in run.error else None,
            }
        )
    return {"runs": runs}
