"""The signed-in user of a request, typed as such, for views only signed-in users reach."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from rest_framework.request import Request


class AuthenticatedHttpRequest(HttpRequest):
    """The request a view behind ``login_required`` gets: its user is signed in. For annotations
    only (django-stubs' way of saying so); Django never builds one."""

    user: User


def signed_in_user(request: HttpRequest | Request) -> User:
    """The user of a request that only signed-in users get this far with (an API endpoint behind
    IsAuthenticated, an admin page), typed as the user it is."""
    user = request.user
    if not isinstance(user, User):  # refused before the view already; never acted on as nobody
        raise PermissionDenied("Sign in first.")
    return user
