"""Bearer tokens for API v1: django-rest-knox's scheme, one query per request."""

from __future__ import annotations

import binascii
from hmac import compare_digest
from typing import Any

from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.translation import gettext as _
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from knox.auth import TokenAuthentication
from knox.crypto import hash_token
from knox.settings import CONSTANTS, knox_settings
from rest_framework.exceptions import AuthenticationFailed

from api.models import ApiToken
from core.compiled_queries import CompiledQuery, attnames, instance_from
from tenants.permissions import role_flags, roles_remember


def token_candidates(token_key: str) -> QuerySet[ApiToken, dict[str, Any]]:
    """The tokens whose key (the secret's first characters) is ``token_key``, each with its owner
    and the owner's global roles (``role_flags``): one query."""
    return ApiToken.objects.filter(token_key=token_key).values(
        *attnames(ApiToken), *attnames(User, prefix="user__"), **role_flags("user_id")
    )


# Every API call runs it: its SQL is built once (`CompiledQuery`), not on each request.
TOKEN_CANDIDATES = CompiledQuery(token_candidates, token_key=str)


class BearerTokenAuthentication(TokenAuthentication):
    """knox's authentication, without its sweep of the user's other tokens on every request
    (a query per call, there to delete expired ones): ours do not expire, they are revoked.
    A token given an expiry still stops working at it."""

    def authenticate_credentials(self, token: bytes) -> tuple[Any, ApiToken]:
        """knox's check (the candidates by key prefix, each compared by digest), with the owner's
        global roles read in the same query: most calls ask for them next."""
        message = _("Invalid token.")
        secret = token.decode("utf-8")
        for row in TOKEN_CANDIDATES.rows(token_key=secret[: CONSTANTS.TOKEN_KEY_LENGTH]):
            auth_token = instance_from(ApiToken, row)
            auth_token.user = instance_from(User, row, prefix="user__")
            if self._cleanup_token(auth_token):
                continue
            try:
                digest = hash_token(secret)
            except (TypeError, binascii.Error):
                raise AuthenticationFailed(message) from None
            if compare_digest(digest, auth_token.digest):
                if knox_settings.AUTO_REFRESH and auth_token.expiry:
                    self.renew_token(auth_token)
                user, _token = self.validate_user(auth_token)
                roles_remember(user, row)
                return user, auth_token
        raise AuthenticationFailed(message)

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
