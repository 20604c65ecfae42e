"""How the API key and staff-session authenticators appear in the OpenAPI schema."""

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "apikeys.authentication.ApiKeyAuthentication"
    name = ["ApiKeyBearer", "ApiKeyHeader"]

    def get_security_definition(self, auto_schema: Any) -> list[dict[str, str]]:
        return [
            {
                "type": "http",
                "scheme": "bearer",
                "description": "Authorization: Bearer <API key> (or DRF's Authorization: Token <API key>)",
            },
            {"type": "apiKey", "in": "header", "name": "X-API-Key"},
        ]


class StaffSessionScheme(OpenApiAuthenticationExtension):
    target_class = "apikeys.authentication.StaffSessionAuthentication"
    name = "StaffSession"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "cookie",
            "name": "sessionid",
            "description": "Staff signed in to the admin",
        }
