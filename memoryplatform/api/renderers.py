"""The REST API's JSON renderer: DRF's output, written by orjson.

Measured (``bench/RESULTS.md``, session 12): a recall's 40 entries in 48 us of CPU against DRF's 139 us, the
same bytes. The output means the same JSON:

- compact, UTF-8 (DRF's ``COMPACT_JSON`` and ``UNICODE_JSON``), U+2028 and U+2029 escaped as DRF escapes
  them;
- dates, times and datetimes, and anything else orjson does not write itself (``Decimal``, lazy strings),
  go to DRF's encoder, so they read as before (a datetime in milliseconds with a ``Z``);
- what orjson refuses (an integer over 64 bits, a key that is not a string, text that is not UTF-8) and a
  pretty-printed answer (``Accept: application/json; indent=4``, the browsable API) are rendered by DRF's
  renderer itself.

One difference: a NaN or infinite float becomes ``null``, where DRF's strict renderer failed with a 500.
No door stores one (:mod:`memoryplatform.text` refuses them on input).
"""

from typing import Any

import orjson
from rest_framework.renderers import JSONRenderer
from rest_framework.utils.encoders import JSONEncoder

_ENCODER = JSONEncoder()
_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME  # dates and times as DRF writes them, not orjson's microseconds
_LINE_SEPARATOR, _PARAGRAPH_SEPARATOR = "\u2028".encode(), "\u2029".encode()


class FastJSONRenderer(JSONRenderer):
    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None
    ) -> bytes:
        if data is None or self.get_indent(accepted_media_type or "", renderer_context or {}) is not None:
            return super().render(data, accepted_media_type, renderer_context)
        try:
            rendered = orjson.dumps(data, default=_ENCODER.default, option=_OPTIONS)
        except orjson.JSONEncodeError:
            return super().render(data, accepted_media_type, renderer_context)
        if _LINE_SEPARATOR in rendered or _PARAGRAPH_SEPARATOR in rendered:
            rendered = rendered.replace(_LINE_SEPARATOR, b"\\u2028").replace(_PARAGRAPH_SEPARATOR, b"\\u2029")
        return rendered
