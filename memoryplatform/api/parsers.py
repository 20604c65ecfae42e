"""The JSON parser of every REST door: DRF's, plus the checks of :mod:`memoryplatform.api.text`."""

import codecs
import json
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from memoryplatform.api.text import json_problem


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


class StrictJSONParser(JSONParser):
    """JSON bodies only as the database can store them: no NUL, no lone surrogate, at most 64 levels deep.

    Python's decoder raises ``RecursionError`` on very deep input; that is a parse error too, not a 500.
    """

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = codecs.getreader(encoding)(stream).read()
            data = json.loads(text, parse_constant=_refuse_constant if self.strict else None)
        except RecursionError:
            raise ParseError("JSON parse error - the body is nested too deeply.") from None
        except ValueError as exc:  # also UnicodeDecodeError
            raise ParseError(f"JSON parse error - {exc}") from None
        problem = json_problem(data)
        if problem:
            raise ParseError(f"JSON parse error - {problem}.")
        return data
