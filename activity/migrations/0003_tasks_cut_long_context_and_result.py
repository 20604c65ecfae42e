"""Issue 33: a task's ``context`` and ``result`` are now at most ``ACTIVITY_MAX_CHARS`` characters as compact
JSON, refused at every door. Rows stored before the limit are cut short here, once, the way the tool-call log
keeps an over-long result of our own tools: the JSON text's head, ending in ``… [cut: N characters as JSON]``.
So every read of a task (the lists, one task, MCP, the admin, the export) is bounded by the write rule alone,
and no read needs a special case for old rows."""

import json

from django.conf import settings
from django.db import migrations
from django.db.models import Q, TextField
from django.db.models.functions import Cast, Length

CUT_MARK = "… [cut: {total} characters as JSON]"  # activity.services.CUT_MARK and clip_result, frozen here


def _clipped(value, limit):
    """The value itself when it fits, else its JSON text cut short with the mark (None: it fits)."""
    total = _json_chars(value)
    if total <= limit:
        return None
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    mark = CUT_MARK.format(total=total)
    keep = limit - len(mark) - 2  # - 2: the quotes of the stored JSON string
    while True:
        cut = text[: max(0, keep)] + mark
        over = _json_chars(cut) - limit  # what escaping the kept text (its quotes, say) added
        if over <= 0 or keep <= 0:
            return cut
        keep -= over


def _json_chars(value):
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str))


def cut_long_tasks(apps, schema_editor):
    Task = apps.get_model("activity", "Task")
    limit = settings.ACTIVITY_MAX_CHARS
    # PostgreSQL's text of a jsonb value is never shorter than its compact JSON: a cheap superset to decode.
    longer = Q(context_chars__gt=limit) | Q(result_chars__gt=limit)
    candidates = (
        Task.objects.alias(
            context_chars=Length(Cast("context", TextField())),
            result_chars=Length(Cast("result", TextField())),
        )
        .filter(longer)
        .only("id", "context", "result")
    )
    for task in candidates.iterator(chunk_size=20):
        changed = {}
        for field in ("context", "result"):
            value = getattr(task, field)
            cut = None if value is None else _clipped(value, limit)
            if cut is not None:
                changed[field] = cut
        if changed:
            Task.objects.filter(pk=task.pk).update(**changed)


class Migration(migrations.Migration):
    dependencies = [("activity", "0002_tasks")]

    operations = [migrations.RunPython(cut_long_tasks, migrations.RunPython.noop, elidable=True)]
