"""Which replays a user sees: every one for fleet admins; their teams' for a team's leads."""

from __future__ import annotations

from django.db.models import Q, QuerySet
from django.http import Http404

from simulations.models import Simulation
from tenants.models import Membership
from tenants.permissions import AnyUser, is_fleet_admin

LIST_FIELDS = (
    "id",
    "team",
    "created_by",
    "created_at",
    "source",
    "trace_name",
    "trace_format",
    "history_days",
    "jobs",
    "preset",
    "policy_settings",
    "fleet_spec",
    "seed",
    "state",
    "progress",
    "cancel_requested",
    "started_at",
    "finished_at",
    "error",
)


def simulations_for_user(*, user: AnyUser) -> QuerySet[Simulation]:
    """Newest first, without the stored trace, results or report (``simulation_for_user`` has them)."""
    rows = Simulation.objects.select_related("team", "created_by").only(
        *LIST_FIELDS, "team__slug", "team__name", "created_by__username"
    )
    if is_fleet_admin(user):
        return rows
    if not user.is_authenticated:
        return rows.none()
    led = Membership.objects.filter(user_id=user.pk, role=Membership.Role.LEAD).values("team_id")
    return rows.filter(Q(team_id__in=led))


def simulation_for_user(*, user: AnyUser, simulation_id: int) -> Simulation:
    """One replay the user may see, results included; 404 otherwise (its existence stays private)."""
    if not 0 < simulation_id < 2**63:  # beyond the id column: nothing there
        raise Http404("No such simulation.")
    visible = simulations_for_user(user=user).values("id")
    try:
        # The stored trace and report (megabytes) load only when read: the page polls its progress.
        return (
            Simulation.objects.select_related("team", "created_by")
            .defer("trace_text", "report_html_z")
            .get(pk=simulation_id, id__in=visible)
        )
    except Simulation.DoesNotExist:
        raise Http404("No such simulation.") from None
