"""What the tests change at the provider between logins: users and their groups, and the client
(Fleetline) with its redirect address. Only callers holding the control token, which `serve`
takes from its environment, may."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from django.contrib.auth.models import Group, User
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from oauth2_provider.models import Application


def _controlled(handle: Callable[[dict[str, Any]], None]) -> Callable[[HttpRequest], HttpResponse]:
    """A POST of JSON from a holder of the control token, handled, answered 204."""

    @csrf_exempt
    @require_POST
    def view(request: HttpRequest) -> HttpResponse:
        if request.headers.get("X-Control-Token") != os.environ["OIDC_PROVIDER_CONTROL_TOKEN"]:
            return HttpResponseForbidden()
        handle(json.loads(request.body))
        return HttpResponse(status=204)

    return view


@_controlled
def user_put(body: dict[str, Any]) -> None:
    """Create or update a user: ``{"username", "password", "email", "groups": [...]}``."""
    user, _ = User.objects.get_or_create(username=body["username"])
    user.email = body.get("email", "")
    user.set_password(body["password"])
    user.save()
    user.groups.set([Group.objects.get_or_create(name=name)[0] for name in body.get("groups", [])])


@_controlled
def client_put(body: dict[str, Any]) -> None:
    """Register a confidential client: ``{"client_id", "client_secret", "redirect_uris": [...]}``."""
    Application.objects.filter(client_id=body["client_id"]).delete()
    Application.objects.create(
        name=body["client_id"],
        client_id=body["client_id"],
        client_secret=body["client_secret"],
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=" ".join(body["redirect_uris"]),
        algorithm=Application.RS256_ALGORITHM,
        skip_authorization=True,
    )
