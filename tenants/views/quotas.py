"""A fleet admin sets a team's quota for one accelerator type from the team page."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from core.auth import AuthenticatedHttpRequest
from fleet.models import AcceleratorType
from tenants import selectors, services
from tenants.forms import QuotaSetForm
from tenants.permissions import require_fleet_admin


@login_required
@require_POST
def quota_set(request: AuthenticatedHttpRequest, slug: str, accelerator: str) -> HttpResponse:
    """``accelerator`` is the type's name, as in the API. Refusals come back to the team page as
    messages, so the page's own forms stay as they were and a reload never posts twice."""
    require_fleet_admin(request.user)
    team = selectors.team_for_user(user=request.user, slug=slug)
    accelerator_type = AcceleratorType.objects.filter(name=accelerator).first()
    if accelerator_type is None:
        raise Http404(f"The fleet has no accelerator type named {accelerator!r}.")
    form = QuotaSetForm(request.POST)
    if not form.is_valid():
        for name, errors in form.errors.items():
            messages.error(request, f"{form[name].label}: {' '.join(str(error) for error in errors)}")
        return redirect("tenants:team_detail", slug=team.slug)
    try:
        services.quota_set(admin=request.user, team=team, accelerator_type=accelerator_type, **form.cleaned_data)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"Quota for {accelerator_type.name} set; it applies from the next scheduling cycle.")
    return redirect("tenants:team_detail", slug=team.slug)
