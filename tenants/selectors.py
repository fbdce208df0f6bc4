"""Read-side queries for tenants. Every tenant-scoped selector takes ``user=`` or ``team=``."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Count, QuerySet
from django.http import Http404

from core.compiled_queries import CompiledQuery
from fleet.selectors import fleet_gpus_by_type
from scheduling.engine import policy_settings
from tenants.models import (
    AuditEvent,
    FleetPolicy,
    Membership,
    NoticeKind,
    Notification,
    NotificationPreference,
    Quota,
    QuotaRequest,
    Team,
)
from tenants.permissions import is_fleet_admin

logger = logging.getLogger(__name__)


def team_ids_for_user(*, user: User | AnonymousUser) -> list[int]:
    """Ids of the teams whose live events the user may receive."""
    if not user.is_authenticated:
        return []
    return list(Membership.objects.filter(user=user).order_by("team_id").values_list("team_id", flat=True))


# Teams ------------------------------------------------------------------------------------------


def teams_for_user(*, user: User | AnonymousUser) -> QuerySet[Team]:
    """The teams the user may open: fleet admins see all, everyone else their memberships."""
    teams = Team.objects.select_related("department").order_by("name")
    if is_fleet_admin(user):
        return teams
    if not user.is_authenticated:
        return teams.none()
    return teams.filter(memberships__user_id=user.pk).distinct()


def team_for_user(*, user: User | AnonymousUser, slug: str) -> Team:
    """The team with this slug if the user may see it; 404 otherwise, so names do not leak."""
    team = teams_for_user(user=user).filter(slug=slug).first()
    if team is None:
        raise Http404("No such team.")
    return team


# Quotas -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QuotaRow:
    accelerator_type_id: int
    accelerator_type: str
    guaranteed: int
    borrow_limit: int | None  # None: unlimited
    lend_limit: int | None  # None: unlimited
    fleet_gpus: int
    in_use: int = 0
    borrowed: int = 0  # of in_use, GPUs beyond the guarantee (their jobs are preemptible by owners)
    lent: int = 0  # unused guarantee that other teams are borrowing right now


# A team's quota rows with what it uses, borrows and lends right now are the scheduler's reading of
# its running jobs: `scheduling.selectors.quota_overview_for_team`, which the team pages reach
# through `tenants.team_activity`.


def quota_requests_for_team(*, team: Team, limit: int = 50) -> list[QuotaRequest]:
    return list(
        QuotaRequest.objects.filter(team=team)
        .select_related("accelerator_type", "requested_by", "decided_by")
        .order_by("-created_at", "-id")[:limit]
    )


def fleet_policy_get() -> FleetPolicy:
    """The policy row, or the defaults (unsaved) before anyone has saved it: reads never write."""
    policy = FleetPolicy.objects.filter(pk=FleetPolicy.SINGLETON_ID).first()
    return policy if policy is not None else FleetPolicy(pk=FleetPolicy.SINGLETON_ID)


def fleet_policy_for_cycle() -> FleetPolicy | None:
    """The policy row as a scheduling cycle may use it; None before anyone has saved one.

    The services refuse a value outside its bounds, but the row may hold one all the same (written
    by hand, or by a release with other bounds). Such a setting is logged at ERROR, naming the field
    and the value, and this cycle uses its default instead: one unusable setting must never stop the
    fleet. The row itself is left as it is for an admin to correct (the log says so every cycle)."""
    policy = FleetPolicy.objects.order_by("pk").first()
    if policy is None:
        return None
    for knob in policy_settings.STORED:
        value = getattr(policy, knob.name)
        # A number outside its bounds or not finite, a switch that is not one, a choice not among
        # the choices, empty where it must not be (`Knob.problem`).
        problem = knob.problem(value)
        if problem is not None:
            logger.error(
                "fleet policy: %s = %r %s; this cycle uses its default, %r, until an admin corrects it",
                knob.name,
                value,
                problem,
                knob.default,
            )
            setattr(policy, knob.name, knob.default)
    return policy


@dataclass(frozen=True, slots=True)
class EngineKnob:
    """A scheduling knob admins cannot set: its engine name, the value every cycle uses, what it does."""

    name: str
    value: str
    description: str


def engine_only_knobs() -> list[EngineKnob]:
    """The engine's knobs that the fleet policy does not set, at the values every cycle runs with."""
    knobs = []
    for knob in policy_settings.ENGINE_ONLY:
        value = knob.default
        shown = ("on" if value else "off") if isinstance(value, bool) else f"{value:,}"
        knobs.append(EngineKnob(name=knob.key, value=shown, description=knob.help))
    return knobs


@dataclass(frozen=True, slots=True)
class PendingRequestRow:
    request: QuotaRequest
    current_guaranteed: int
    guarantees_total_after: int
    fleet_gpus: int
    overcommit_ratio: float

    @property
    def allowed_gpus(self) -> int:
        return int(self.fleet_gpus * self.overcommit_ratio)

    @property
    def fits(self) -> bool:
        return self.guarantees_total_after <= self.allowed_gpus


def pending_requests_for_admin() -> list[PendingRequestRow]:
    """The approval queue, oldest first, each with what approving it would do. Four queries."""
    requests = list(
        QuotaRequest.objects.filter(state=QuotaRequest.State.PENDING)
        .select_related("team", "accelerator_type", "requested_by")
        .order_by("created_at", "id")
    )
    type_ids = {r.accelerator_type_id for r in requests}
    guaranteed: dict[tuple[int, int], int] = {}
    totals: dict[int, int] = {}
    for team_id, type_id, gpus in Quota.objects.filter(accelerator_type_id__in=type_ids).values_list(
        "team_id", "accelerator_type_id", "guaranteed"
    ):
        guaranteed[(team_id, type_id)] = gpus
        totals[type_id] = totals.get(type_id, 0) + gpus
    capacity = fleet_gpus_by_type() if requests else {}
    ratio = fleet_policy_get().guarantee_overcommit_ratio if requests else 1.0
    rows = []
    for r in requests:
        current = guaranteed.get((r.team_id, r.accelerator_type_id), 0)
        rows.append(
            PendingRequestRow(
                request=r,
                current_guaranteed=current,
                guarantees_total_after=totals.get(r.accelerator_type_id, 0) - current + r.guaranteed,
                fleet_gpus=capacity.get(r.accelerator_type_id, 0),
                overcommit_ratio=ratio,
            )
        )
    return rows


# Audit and notifications ------------------------------------------------------------------------


def audit_events(*, kind: str | None = None, team: Team | None = None) -> QuerySet[AuditEvent]:
    events = AuditEvent.objects.select_related("actor", "team").order_by("-created_at", "-id")
    if kind:
        events = events.filter(kind=kind)
    if team is not None:
        events = events.filter(team=team)
    return events


def notifications_for_user(*, user: User | AnonymousUser) -> QuerySet[Notification]:
    if not user.is_authenticated:
        return Notification.objects.none()
    return Notification.objects.filter(user_id=user.pk).order_by("-created_at", "-id")


def unread_of(user_id: int) -> QuerySet[Notification, Any]:
    return Notification.objects.filter(user_id=user_id, read=False).values("user_id").annotate(unread=Count("id"))


# Every page's navigation asks it: its SQL is built once (`CompiledQuery`), not on each request.
UNREAD = CompiledQuery(unread_of, user_id=int)


def unread_notification_count(*, user: User | AnonymousUser) -> int:
    if not user.is_authenticated:
        return 0
    row = UNREAD.first(user_id=user.pk)
    return row["unread"] if row else 0


def unread_notification_counts(*, user_ids: Iterable[int]) -> dict[int, int]:
    """Each user's unread count in one query (users with none are 0)."""
    ids = sorted(set(user_ids))
    counts = dict.fromkeys(ids, 0)
    rows = (
        Notification.objects.filter(user_id__in=ids, read=False)
        .order_by()
        .values_list("user_id")
        .annotate(unread=Count("id"))
    )
    counts.update(rows)
    return counts


@dataclass(frozen=True, slots=True)
class NoticeChannels:
    """Where a user hears of one kind of notice."""

    in_app: bool
    email: bool


# In the app for every kind; by e-mail for what asks for action: a job that failed or was
# preempted (resubmit, checkpoint more often), a quota decision, a budget alert.
NOTICE_DEFAULTS: dict[str, NoticeChannels] = {
    NoticeKind.JOB_STARTED: NoticeChannels(in_app=True, email=False),
    NoticeKind.JOB_PREEMPTED: NoticeChannels(in_app=True, email=True),
    NoticeKind.JOB_FAILED: NoticeChannels(in_app=True, email=True),
    NoticeKind.JOB_FINISHED: NoticeChannels(in_app=True, email=False),
    NoticeKind.QUOTA: NoticeChannels(in_app=True, email=True),
    NoticeKind.BUDGET: NoticeChannels(in_app=True, email=True),
}


def notification_preferences_for_users(*, user_ids: Iterable[int]) -> dict[int, dict[str, NoticeChannels]]:
    """Every kind's channels for each user, their own choices over the defaults, in one query."""
    ids = set(user_ids)
    preferences = {user_id: dict(NOTICE_DEFAULTS) for user_id in ids}
    rows = NotificationPreference.objects.filter(user_id__in=ids).values_list("user_id", "kind", "in_app", "email")
    for user_id, kind, in_app, email in rows:
        if kind in NOTICE_DEFAULTS:
            preferences[user_id][kind] = NoticeChannels(in_app=in_app, email=email)
    return preferences


def notification_preferences_for_user(*, user: User) -> dict[str, NoticeChannels]:
    return notification_preferences_for_users(user_ids=[user.pk])[user.pk]
