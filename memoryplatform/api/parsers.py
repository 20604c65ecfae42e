"""The JSON parser of every REST door: DRF's, plus the checks of :mod:`memoryplatform.text`."""

import codecs
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from memoryplatform.text import json_loads, json_problem, json_refusal


class StrictJSONParser(JSONParser):
    """JSON bodies only as the database can store them: no NUL, no lone surrogate, at most 64 levels deep,
    and no key given twice in one object (a 400 naming it).

    Python's decoder raises ``RecursionError`` on very deep input; that is a parse error too, not a 500.
    """

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = codecs.getreader(encoding)(stream).read()
            data = json_loads(text, strict=self.strict)
        except RecursionError:
            raise ParseError("JSON parse error - the body is nested too deeply.") from None
        except ValueError as exc:  # also UnicodeDecodeError and DuplicateKey
            raise ParseError(f"JSON parse error - {exc}") from None
        problem = json_problem(data)
        if problem:
            raise ParseError(json_refusal(problem))
        return data
