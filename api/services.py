"""API tokens: made, listed and revoked by their owner only. The secret is returned once, at
creation; afterwards only its first characters (``token_key``) identify it."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet

from api.models import TOKEN_NAME_MAX_LENGTH, ApiToken
from core.socket_events import socket_tokens_revoked_publish

# A user with more live tokens than this has lost track of them: revoke some first.
MAX_TOKENS_PER_USER = 50


@dataclass(frozen=True, slots=True)
class NewToken:
    token: ApiToken
    secret: str  # shown once, never stored


def api_tokens_for_user(*, user: User) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(user_id=user.pk).order_by("-created")


def api_token_create(*, user: User, name: str) -> NewToken:
    """A new token named ``name`` for ``user``; raises ValidationError keyed by field."""
    name = name.strip()
    if not name:
        raise ValidationError({"name": "Give the token a name, such as the script that will use it."})
    if len(name) > TOKEN_NAME_MAX_LENGTH:
        raise ValidationError({"name": f"A token name has at most {TOKEN_NAME_MAX_LENGTH} characters."})
    if api_tokens_for_user(user=user).count() >= MAX_TOKENS_PER_USER:
        raise ValidationError({"name": f"You have {MAX_TOKENS_PER_USER} tokens: revoke one first."})
    token, secret = ApiToken.objects.create(user=user, name=name)
    return NewToken(token=token, secret=secret)


def api_token_revoke(*, user: User, token_key: str) -> bool:
    """Revoke the user's token(s) starting with ``token_key``; False when there was none. Another
    user's token is never touched, whatever key is given. The sockets the revoked tokens opened
    close once the revocation commits."""
    with transaction.atomic():
        digests = list(ApiToken.objects.filter(user_id=user.pk, token_key=token_key).values_list("digest", flat=True))
        deleted, _ = ApiToken.objects.filter(digest__in=digests).delete()
        socket_tokens_revoked_publish(token_digests=digests)
    return deleted > 0
