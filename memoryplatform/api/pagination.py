from typing import Any

from rest_framework import pagination
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request

from memoryplatform.api.serializers import AsciiIntegerField

# The largest offset any list takes: far past any real list, and far inside the databases' 64-bit range.
MAX_OFFSET = 1_000_000_000


class LimitOffsetPagination(pagination.LimitOffsetPagination):
    """Bounded pagination: ``?limit=`` (default 50, 1 to 500) and ``?offset=`` (0 to :data:`MAX_OFFSET`).

    DRF's own falls back to the default on a value it cannot read, reads ``"١"`` as 1 and passes any
    offset on to the database; here a bad value is a 400 that names the parameter.
    """

    default_limit = 50
    max_limit = 500

    def get_limit(self, request: Request) -> int:
        return self._bounded(request, self.limit_query_param, self.default_limit, 1, self.max_limit)

    def get_offset(self, request: Request) -> int:
        return self._bounded(request, self.offset_query_param, 0, 0, MAX_OFFSET)

    @staticmethod
    def _bounded(request: Request, name: str, default: int, low: int, high: int) -> int:
        raw = request.query_params.get(name)
        if raw is None:
            return default
        field = AsciiIntegerField(min_value=low, max_value=high)
        try:
            return field.run_validation(raw)
        except ValidationError as exc:
            raise ValidationError({name: exc.detail}) from None

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        bounds = {
            self.limit_query_param: {"minimum": 1, "maximum": self.max_limit},
            self.offset_query_param: {"minimum": 0, "maximum": MAX_OFFSET},
        }
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            parameter["schema"].update(bounds.get(parameter["name"], {}))
        return parameters
