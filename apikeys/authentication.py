"""DRF authentication: an API key in ``Authorization: Bearer``, ``Authorization: Token`` (DRF's own scheme) or
``X-API-Key``; staff sessions as admin."""

from typing import Any

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from apikeys.caller import Caller
from apikeys.services import KeyRefused, apikey_authenticate
from memoryplatform import providercalls

KEY_SCHEMES = frozenset({"bearer", "token"})


def presented_key(headers: Any) -> str | None:
    """The raw key from the request headers, or ``None`` when none is offered."""
    header = headers.get("Authorization", "")
    if header:
        scheme, _, credentials = header.partition(" ")
        if scheme.lower() in KEY_SCHEMES:
            return credentials.strip() or None
    return headers.get("X-API-Key", "").strip() or None


class ApiKeyAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[Caller, Any] | None:
        raw_key = presented_key(request.headers)
        if raw_key is None:
            return None
        try:
            key = apikey_authenticate(raw_key=raw_key)
        except KeyRefused as exc:
            raise exceptions.AuthenticationFailed(str(exc)) from None
        caller = Caller.for_key(key)
        providercalls.bind(caller.provider_share)  # its provider calls, bounded per agent
        return caller, key

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="memoryplatform"'


class StaffSessionAuthentication(authentication.SessionAuthentication):
    """Staff signed in to the admin use the browsable API as admins (CSRF enforced on writes)."""

    def authenticate(self, request: Request) -> tuple[Caller, None] | None:
        result = super().authenticate(request)
        if result is None:
            return None
        user, _ = result
        if not (user.is_active and user.is_staff):
            return None
        return Caller.for_staff(user), None
