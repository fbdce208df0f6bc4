"""The API tokens page: each user makes (named), lists and revokes their own tokens. A new
token's secret is shown once, in the answer to the form that made it, and never stored."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from api.models import TOKEN_NAME_MAX_LENGTH
from api.services import NewToken, api_token_create, api_token_revoke, api_tokens_for_user
from core.auth import AuthenticatedHttpRequest


class TokenCreateForm(forms.Form):
    name = forms.CharField(
        max_length=TOKEN_NAME_MAX_LENGTH, help_text="What will use it, for example “nightly sweep” or “laptop CLI”."
    )


@never_cache
@login_required
def token_list_view(request: AuthenticatedHttpRequest) -> HttpResponse:
    form = TokenCreateForm(request.POST or None)
    created: NewToken | None = None
    if request.method == "POST" and form.is_valid():
        try:
            created = api_token_create(user=request.user, name=form.cleaned_data["name"])
        except ValidationError as error:
            for field, problems in error.message_dict.items():
                form.add_error(field if field in form.fields else None, problems)
        else:
            form = TokenCreateForm()
    return render(
        request,
        "api/tokens.html",
        {
            "form": form,
            "created": created,
            "tokens": api_tokens_for_user(user=request.user),
            "api_url": request.build_absolute_uri("/api/v1/"),
        },
        status=400 if request.method == "POST" and created is None else 200,
    )


@login_required
@require_POST
def token_revoke_view(request: AuthenticatedHttpRequest, token_key: str) -> HttpResponse:
    if api_token_revoke(user=request.user, token_key=token_key):
        messages.success(request, f"Revoked the token {token_key}…: it no longer works.")
    else:
        messages.error(request, "No such token among yours.")
    return redirect("api-tokens")
