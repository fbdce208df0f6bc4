"""What the tests change at the provider between logins: users and their groups, and the client
(Fleetline) with its redirect address. Only callers holding the control token, which `serve`
takes from its environment, may."""

from __future__ import annotations

import json
import os
from typing import Any

from django.contrib.auth.models import Group, User
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from oauth2_provider.models import Application


def _body(request: HttpRequest) -> dict[str, Any] | None:
    if request.headers.get("X-Control-Token") != os.environ["OIDC_PROVIDER_CONTROL_TOKEN"]:
        return None
    body: dict[str, Any] = json.loads(request.body)
    return body


@csrf_exempt
@require_POST
def user_put(request: HttpRequest) -> HttpResponse:
    """Create or update a user: ``{"username", "password", "email", "groups": [...]}``."""
    body = _body(request)
    if body is None:
        return HttpResponseForbidden()
    user, _ = User.objects.get_or_create(username=body["username"])
    user.email = body.get("email", "")
    user.set_password(body["password"])
    user.save()
    user.groups.set([Group.objects.get_or_create(name=name)[0] for name in body.get("groups", [])])
    return HttpResponse(status=204)


@csrf_exempt
@require_POST
def client_put(request: HttpRequest) -> HttpResponse:
    """Register a confidential client: ``{"client_id", "client_secret", "redirect_uris": [...]}``."""
    body = _body(request)
    if body is None:
        return HttpResponseForbidden()
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
    return HttpResponse(status=204)
