"""Who uses the fleet and on what terms: departments (quota cohorts), teams, members, quotas,
quota requests, priority classes, the fleet policy, the audit log and in-app notifications."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from fleet.models import AcceleratorType
from scheduling.engine import policy_settings
from scheduling.engine.knobs import Knob
from scheduling.engine.policy_settings import CHARGE_MODEL_LABELS
from scheduling.engine.vocabulary import KIND_LABELS, QUEUE_ORDER_LABELS, WITHIN_TEAM_ORDER_LABELS
from tenants import policy_units


class Department(models.Model):
    """A quota cohort: teams of one department borrow each other's idle guarantees first."""

    name = models.CharField(max_length=100, unique=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Team(models.Model):
    department = models.ForeignKey(Department, on_delete=models.PROTECT, related_name="teams")
    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(max_length=100, unique=True)
    fairshare_weight = models.FloatField(default=1.0)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    class Role(models.TextChoices):
        MEMBER = "member", "Member"
        LEAD = "lead", "Lead"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "team"], name="membership_unique_user_team"),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


def validate_positive(value: float) -> None:
    """Strictly above zero: a half-life or an interval of zero would divide by zero."""
    if value <= 0:
        raise ValidationError("Must be greater than zero.")


def validate_penalty(value: float) -> None:
    """A topology penalty divides a job's speed, so below 1.0 would make spreading faster."""
    if value < 1.0:
        raise ValidationError("Must be at least 1.0.")


def validate_finite(value: float) -> None:
    """NaN passes every comparison with a bound, so it is refused first (as are the infinities)."""
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an integer too large for a float
        finite = False
    if not finite:
        # Not "invalid": a model field puts its own message ("must be a float") in place of that code's.
        raise ValidationError("Must be a finite number.", code="not_finite")


def policy_bounds(name: str) -> list[Any]:
    """A policy number's validators, from its bounds in `tenants.policy_units` (stored units)."""
    field = policy_units.BY_NAME[name]
    assert field.minimum is not None and field.maximum is not None, name
    # Django fills in a message's %(limit_value)s: a literal percent sign is written twice.
    message = f"Must be {field.stored_range}.".replace("%", "%%")
    return [
        validate_finite,
        MinValueValidator(field.minimum, message=message),
        MaxValueValidator(field.maximum, message=message),
    ]


def _non_negative(field: str, *, nullable: bool = False) -> models.CheckConstraint:
    condition = models.Q(**{f"{field}__gte": 0})
    if nullable:
        condition |= models.Q(**{f"{field}__isnull": True})
    return models.CheckConstraint(condition=condition, name=f"%(class)s_{field}_non_negative")


class Quota(models.Model):
    """A team's share of one accelerator type. ``None`` limits mean unlimited."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="quotas")
    accelerator_type = models.ForeignKey(AcceleratorType, on_delete=models.PROTECT, related_name="quotas")
    guaranteed = models.IntegerField(default=0, validators=[MinValueValidator(0)])
    borrow_limit = models.IntegerField(null=True, blank=True, validators=[MinValueValidator(0)])
    lend_limit = models.IntegerField(null=True, blank=True, validators=[MinValueValidator(0)])
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["team__name", "accelerator_type__name"]
        constraints = [
            models.UniqueConstraint(fields=["team", "accelerator_type"], name="quota_unique_team_accelerator_type"),
            _non_negative("guaranteed"),
            _non_negative("borrow_limit", nullable=True),
            _non_negative("lend_limit", nullable=True),
        ]

    def __str__(self) -> str:
        return f"{self.team} · {self.accelerator_type}: {self.guaranteed} guaranteed"


class QuotaRequest(models.Model):
    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"
        WITHDRAWN = "withdrawn", "Withdrawn"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="quota_requests")
    accelerator_type = models.ForeignKey(AcceleratorType, on_delete=models.PROTECT, related_name="quota_requests")
    guaranteed = models.IntegerField(validators=[MinValueValidator(0)])
    borrow_limit = models.IntegerField(null=True, blank=True, validators=[MinValueValidator(0)])
    lend_limit = models.IntegerField(null=True, blank=True, validators=[MinValueValidator(0)])
    justification = models.TextField()
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="quota_requests")
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="quota_decisions",
    )
    decision_note = models.TextField(blank=True)
    # Approved by the fleet admin who filed it, there being no other fleet admin to decide it.
    self_approved = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "accelerator_type"],
                condition=models.Q(state="pending"),
                name="quota_request_one_pending_per_team_type",
            ),
            _non_negative("guaranteed"),
            _non_negative("borrow_limit", nullable=True),
            _non_negative("lend_limit", nullable=True),
        ]
        indexes = [models.Index(fields=["state", "created_at"], name="quota_request_state_idx")]

    def __str__(self) -> str:
        return f"{self.team} asks {self.guaranteed} {self.accelerator_type} ({self.state})"


class PriorityClass(models.Model):
    class Kind(models.TextChoices):
        SERVING = "serving", KIND_LABELS["serving"]
        TRAINING = "training", KIND_LABELS["training"]
        BATCH = "batch", KIND_LABELS["batch"]

    name = models.SlugField(max_length=50, unique=True)
    value = models.IntegerField(help_text="Higher runs first.")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    preemptible = models.BooleanField(
        default=True,
        help_text="Its running jobs may be evicted or shrunk for higher-priority work or by owners reclaiming a loan.",
    )
    may_preempt = models.BooleanField(
        default=True,
        help_text="Its jobs may evict or shrink running work they have a right to (lower priority, or borrowed "
        "from their team's guarantee) to start. Off, they wait for free GPUs instead, as Kubernetes' "
        "preemptionPolicy Never. Serving classes need it on to take GPUs from training when demand rises.",
    )

    class Meta:
        ordering = ["-value", "name"]
        verbose_name_plural = "priority classes"

    def __str__(self) -> str:
        return f"{self.name} ({self.value})"


def policy_column(knob: Knob) -> models.Field[Any, Any]:
    """The stored policy's column for a setting, from its declaration: its type, default, bounds
    (`policy_bounds`), choices, label and help. A new setting's column is one generated AddField."""
    shared: dict[str, Any] = {"default": knob.default, "verbose_name": knob.label, "help_text": knob.help}
    if knob.nullable:
        shared.update(null=True, blank=True)
    if knob.kind is bool:
        return models.BooleanField(**shared)
    if knob.kind is str:
        return models.CharField(max_length=20, choices=list(knob.choices), **shared)
    if knob.kind is int:
        return models.PositiveIntegerField(validators=policy_bounds(knob.name), **shared)
    return models.FloatField(validators=policy_bounds(knob.name), **shared)


if TYPE_CHECKING:

    class _PolicyColumns(models.Model):
        class Meta:
            abstract = True

else:
    # An abstract model with one column per stored setting (`policy_settings.STORED`), built
    # from the declarations; FleetPolicy inherits them as it would any abstract base's fields.
    _PolicyColumns = type(
        "_PolicyColumns",
        (models.Model,),
        {
            "__module__": __name__,
            "Meta": type("Meta", (), {"abstract": True}),
            **{knob.name: policy_column(knob) for knob in policy_settings.STORED},
        },
    )


class FleetPolicy(_PolicyColumns):
    """The one row of scheduling policy (pk 1); the live cycle reads it every cycle. Its columns
    are the stored settings (`scheduling.engine.policy_settings.STORED`), one each, named, typed,
    bounded and defaulted as declared."""

    SINGLETON_ID = 1

    class QueueOrder(models.TextChoices):
        FAIR_SHARE = "fair_share", QUEUE_ORDER_LABELS["fair_share"]
        SHORTEST_LIMIT = "shortest_limit", QUEUE_ORDER_LABELS["shortest_limit"]

    class WithinTeamOrder(models.TextChoices):
        SUBMIT = "submit", WITHIN_TEAM_ORDER_LABELS["submit"]
        SHORTEST_LIMIT = "shortest_limit", WITHIN_TEAM_ORDER_LABELS["shortest_limit"]
        LAS = "las", WITHIN_TEAM_ORDER_LABELS["las"]

    class ChargeModel(models.TextChoices):
        USAGE = "usage", CHARGE_MODEL_LABELS["usage"]
        GUARANTEE = "guarantee", CHARGE_MODEL_LABELS["guarantee"]

    if TYPE_CHECKING:
        # The settings' columns are generated, so type checkers see them as this: any stored
        # setting by name (`policy_settings.BY_NAME[name].kind` says its type).
        def __getattr__(self, name: str) -> Any: ...

    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "fleet policy"
        constraints = [
            models.CheckConstraint(condition=models.Q(id=1), name="fleet_policy_singleton"),
            models.CheckConstraint(
                condition=models.Q(reservation_depth__gte=1), name="fleet_policy_reservation_depth_min"
            ),
            models.CheckConstraint(
                condition=models.Q(guarantee_overcommit_ratio__gt=0),
                name="fleet_policy_overcommit_positive",
            ),
        ]

    def __str__(self) -> str:
        return "Fleet policy"


class AuditEvent(models.Model):
    class Kind(models.TextChoices):
        QUOTA_REQUEST_SUBMITTED = "quota_request.submitted", "Quota request submitted"
        QUOTA_REQUEST_WITHDRAWN = "quota_request.withdrawn", "Quota request withdrawn"
        QUOTA_REQUEST_APPROVED = "quota_request.approved", "Quota request approved"
        QUOTA_REQUEST_SELF_APPROVED = (
            "quota_request.self_approved",
            "Quota request self-approved (by its requester, no other fleet admin)",
        )
        QUOTA_REQUEST_REJECTED = "quota_request.rejected", "Quota request rejected"
        QUOTA_SET = "quota.set", "Quota set by a fleet admin"
        PRIORITY_CLASS_SAVED = "priority_class.saved", "Priority class saved"
        FLEET_POLICY_UPDATED = "fleet_policy.updated", "Fleet policy updated"
        NODE_CORDONED = "node.cordon", "Node cordoned"
        NODE_UNCORDONED = "node.uncordon", "Node uncordoned"
        NODE_DRAINED = "node.drain", "Node drained"
        RATE_SET = "finance.rate_set", "Rate set"
        BUDGET_SET = "finance.budget_set", "Budget set"
        MONTH_CLOSED = "finance.month_closed", "Month closed"
        MONTH_REOPENED = "finance.month_reopened", "Month reopened"
        MEMBER_ADDED = "membership.added", "Member added"
        MEMBER_REMOVED = "membership.removed", "Member removed"
        MEMBER_ROLE_CHANGED = "membership.role", "Member role changed"
        LOGIN_LOCKED_OUT = "account.locked_out", "Login locked out after repeated wrong passwords"
        ROLE_GRANTED = "account.role_granted", "Role granted"
        ROLE_REVOKED = "account.role_revoked", "Role revoked"
        SSO_ACCOUNT_CREATED = "account.sso_created", "Account created at its first single sign-on"
        SSO_ACCOUNT_LINKED = "account.sso_linked", "Account linked to single sign-on"

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="audit_events",
    )
    created_at = models.DateTimeField(default=timezone.now)
    kind = models.CharField(max_length=40, choices=Kind.choices)
    team = models.ForeignKey(Team, on_delete=models.SET_NULL, null=True, blank=True, related_name="audit_events")
    object_repr = models.CharField(max_length=200)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    # What made a change that no person made (actor empty): "single sign-on" for what a login
    # took from the identity provider's groups; blank for the scheduler.
    source = models.CharField(max_length=40, blank=True, default="")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["kind", "created_at"], name="audit_kind_created_idx"),
            models.Index(fields=["team", "created_at"], name="audit_team_created_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.kind}: {self.object_repr}"


class OidcIdentity(models.Model):
    """The identity provider's account a Fleetline user signs in with: the ID token's issuer and
    subject, which the provider never reassigns (a username or an e-mail address may change
    hands, so neither finds the user)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oidc_identity")
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="oidc_identity_unique_subject")]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


class NoticeKind(models.TextChoices):
    """What a notice is about; each user chooses per kind whether to be told in the app, by e-mail."""

    JOB_STARTED = "job_started", "A job of mine started"
    JOB_PREEMPTED = "job_preempted", "A job of mine was preempted"
    JOB_FAILED = (
        "job_failed",
        "A job of mine was requeued by a failure or did not finish "
        "(a node failed under it, its command failed, or it hit its time limit)",
    )
    JOB_FINISHED = "job_finished", "A job of mine finished"
    QUOTA = "quota", "Quota decisions (my requests, my teams' quotas)"
    BUDGET = "budget", "Budget alerts (80 % and 100 % of a month's budget)"


class Notification(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications")
    kind = models.CharField(max_length=20, choices=NoticeKind.choices, blank=True)
    message = models.CharField(max_length=300)
    url = models.CharField(max_length=300, blank=True)
    # The jobs a summary of job events is about, each {"id", "name", "kind"}, linked from the list.
    jobs = models.JSONField(default=list, blank=True)
    read = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "read"], name="notification_user_read_idx")]

    def __str__(self) -> str:
        return f"To {self.user}: {self.message}"


class NotificationPreference(models.Model):
    """How one user wants to hear of one kind of notice. A kind without a row has the defaults
    (``tenants.selectors.NOTICE_DEFAULTS``): in the app for every kind, by e-mail for what needs acting on."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_preferences"
    )
    kind = models.CharField(max_length=20, choices=NoticeKind.choices)
    in_app = models.BooleanField()
    email = models.BooleanField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "kind"], name="notification_preference_unique")]

    def __str__(self) -> str:
        return f"{self.user}: {self.kind} (in app {self.in_app}, e-mail {self.email})"
