"""Permission classes per role. A missing or bad key is 401; a role that may not do a thing is 403."""

from typing import Any

from rest_framework.exceptions import NotAuthenticated
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from apikeys.caller import Caller


def _caller(request: Request) -> Caller | None:
    return request.user if isinstance(request.user, Caller) else None


def request_caller(request: Request) -> Caller:
    """The caller a view acts for. Its permission classes have already refused a request without one."""
    caller = _caller(request)
    if caller is None:
        raise NotAuthenticated()
    return caller


class IsAuthenticatedCaller(BasePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        return _caller(request) is not None


class IsAgentCaller(BasePermission):
    message = "This endpoint needs an agent key."

    def has_permission(self, request: Request, view: Any) -> bool:
        caller = _caller(request)
        return caller is not None and caller.is_agent


class IsAdminCaller(BasePermission):
    message = "This endpoint needs an admin key."

    def has_permission(self, request: Request, view: Any) -> bool:
        caller = _caller(request)
        return caller is not None and caller.is_admin


class ReadAnyWriteAdmin(BasePermission):
    """Every role reads; only admins write."""

    message = "This change needs an admin key."

    def has_permission(self, request: Request, view: Any) -> bool:
        caller = _caller(request)
        if caller is None:
            return False
        return request.method in SAFE_METHODS or caller.is_admin


class ReadAnyWriteAgentOrAdmin(BasePermission):
    """Every role reads; viewers may not write."""

    message = "A viewer key may only read."

    def has_permission(self, request: Request, view: Any) -> bool:
        caller = _caller(request)
        if caller is None:
            return False
        return request.method in SAFE_METHODS or caller.role in {"agent", "admin"}
