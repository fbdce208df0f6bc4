"""Read-side queries the API needs beyond the apps' own selectors; scoped by ``user=``."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet
from django.http import Http404

from tenants.models import Membership, QuotaRequest, Team
from tenants.selectors import teams_for_user


def quota_requests_for_user(*, user: User | AnonymousUser) -> QuerySet[QuotaRequest]:
    """Requests of the teams the user may open (every team's for fleet admins)."""
    return QuotaRequest.objects.filter(team__in=teams_for_user(user=user).values("pk")).select_related(
        "team", "accelerator_type", "requested_by", "decided_by"
    )


def quota_request_for_user(*, user: User | AnonymousUser, quota_request_id: int) -> QuotaRequest:
    """One request if the user may see it; 404 otherwise, so other teams' requests do not leak."""
    request = quota_requests_for_user(user=user).filter(pk=quota_request_id).first()
    if request is None:
        raise Http404("No such quota request.")
    return request


def memberships_for_team(*, team: Team) -> QuerySet[Membership]:
    return Membership.objects.filter(team=team).select_related("user").order_by("user__username")
