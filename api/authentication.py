"""Bearer tokens for API v1: django-rest-knox's scheme, one query per request."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from knox.auth import TokenAuthentication


class BearerTokenAuthentication(TokenAuthentication):
    """knox's authentication, without its sweep of the user's other tokens on every request
    (a query per call, there to delete expired ones): ours do not expire, they are revoked.
    A token given an expiry still stops working at it."""

    def _cleanup_token(self, auth_token: Any) -> bool:
        if auth_token.expiry is not None and auth_token.expiry < timezone.now():
            auth_token.delete()
            return True
        return False


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """How the OpenAPI schema describes `BearerTokenAuthentication` (defining it registers it)."""

    target_class = "api.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API token from the API tokens page: `Authorization: Bearer <token>`.",
        }
