"""Request log: one line per API request, naming the caller (agent or role) and key prefix, never the key."""

import logging
import time
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

logger = logging.getLogger("memoryplatform.requests")


class RequestLogMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        if request.path.startswith("/static/"):
            return response
        caller = getattr(request, "user", None)
        describe = getattr(caller, "log_label", None)
        if callable(describe):
            who = describe()
        elif getattr(caller, "is_authenticated", False):
            who = f"staff={caller.get_username()}"
        else:
            who = "anonymous"
        logger.info(
            "%s %s %s %.1fms caller=%s",
            request.method,
            request.path,
            response.status_code,
            (time.perf_counter() - started) * 1000,
            who,
        )
        return response
