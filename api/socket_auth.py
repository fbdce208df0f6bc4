"""API tokens on the live websocket: a script opens ``/ws/fleet/`` with
``Authorization: Bearer <token>`` instead of a session cookie; its socket lives as long as the
token does (revoking the token closes it at once)."""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth.models import User
from rest_framework.exceptions import AuthenticationFailed

from api.authentication import BearerTokenAuthentication
from api.models import ApiToken


def _bearer(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, secret = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and secret.strip():
                return secret.strip()
    return None


def socket_user_for_token(*, headers: Iterable[tuple[bytes, bytes]]) -> tuple[User, str] | None:
    """The user a socket's bearer token belongs to, with the token's digest; None without a
    token, or with a wrong, revoked or inactive user's one."""
    secret = _bearer(headers)
    if secret is None:
        return None
    try:
        user, token = BearerTokenAuthentication().authenticate_credentials(secret.encode())
    except AuthenticationFailed:
        return None
    return user, token.digest


def socket_token_user(*, token_digest: str, user_id: int) -> User | None:
    """The token's user while the token still exists and the user is active."""
    token = ApiToken.objects.filter(digest=token_digest, user_id=user_id).select_related("user").first()
    if token is None or not token.user.is_active:
        return None
    return token.user
