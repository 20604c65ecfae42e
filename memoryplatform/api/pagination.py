from rest_framework import pagination


class LimitOffsetPagination(pagination.LimitOffsetPagination):
    """Bounded pagination: ``?limit=`` (default 50, at most 500) and ``?offset=``."""

    default_limit = 50
    max_limit = 500
