"""Finance's records: prices per GPU-hour, team budgets and their alerts, closed months, and
report exports built in the background. Money is ``Decimal`` in ``settings.FINANCE_CURRENCY``."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.utils import timezone

from fleet.models import AcceleratorType

ZERO = Decimal("0")


class Rate(models.Model):
    """The price of one GPU-hour of an accelerator type from ``effective_from`` (a fleet calendar
    day) until the next rate of that type. Rows are never edited: a new price is a new row."""

    accelerator_type = models.ForeignKey(AcceleratorType, on_delete=models.PROTECT, related_name="rates")
    price_per_gpu_hour = models.DecimalField(max_digits=10, decimal_places=4, validators=[MinValueValidator(ZERO)])
    effective_from = models.DateField()
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["accelerator_type__name", "effective_from"]
        constraints = [
            models.UniqueConstraint(fields=["accelerator_type", "effective_from"], name="rate_one_per_type_and_day"),
            models.CheckConstraint(condition=models.Q(price_per_gpu_hour__gte=0), name="rate_price_not_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.accelerator_type} {self.price_per_gpu_hour}/GPU-h from {self.effective_from}"


class Budget(models.Model):
    """A team's monthly budget, in money or in GPU-hours."""

    class Unit(models.TextChoices):
        MONEY = "money", "Money"
        GPU_HOURS = "gpu_h", "GPU-hours"

    team = models.OneToOneField("tenants.Team", on_delete=models.CASCADE, related_name="budget")
    unit = models.CharField(max_length=10, choices=Unit.choices, default=Unit.MONEY)
    monthly_amount = models.DecimalField(max_digits=14, decimal_places=2, validators=[MinValueValidator(ZERO)])
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=models.Q(monthly_amount__gte=0), name="budget_amount_not_negative")
        ]

    def __str__(self) -> str:
        return f"{self.team}: {self.monthly_amount} {self.get_unit_display()} a month"


class BudgetAlert(models.Model):
    """A team's spend crossed ``threshold_percent`` of its budget in ``month``: recorded once, so
    the lead and finance are told once per threshold per month."""

    team = models.ForeignKey("tenants.Team", on_delete=models.CASCADE, related_name="budget_alerts")
    month = models.DateField(help_text="The first day of the fleet calendar month.")
    threshold_percent = models.PositiveSmallIntegerField()
    spend = models.DecimalField(max_digits=16, decimal_places=2)
    budget = models.DecimalField(max_digits=14, decimal_places=2)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "month", "threshold_percent"], name="budget_alert_once")]

    def __str__(self) -> str:
        return f"{self.team} at {self.threshold_percent}% in {self.month:%Y-%m}"


class MonthClose(models.Model):
    """A closed fleet calendar month and its report as it stood when closed. The snapshot is
    never rewritten; reopening records who, when and why, and a later close is a new row."""

    month = models.DateField(help_text="The first day of the fleet calendar month.")
    snapshot = models.JSONField()
    closed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    closed_at = models.DateTimeField(default=timezone.now)
    reopened_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    reopened_at = models.DateTimeField(null=True, blank=True)
    reopen_reason = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["-month", "-closed_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["month"], condition=models.Q(reopened_at__isnull=True), name="month_closed_once"
            )
        ]

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} closed"


class ReportExport(models.Model):
    """A report file built by a worker on the ``reports`` queue, for periods too long to build in
    the request."""

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Building"
        DONE = "done", "Ready"
        FAILED = "failed", "Failed"

    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    first_day = models.DateField()
    last_day = models.DateField()
    file_format = models.CharField(max_length=4)
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    progress_percent = models.PositiveSmallIntegerField(default=0)
    content = models.BinaryField(null=True, blank=True)
    error = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.first_day}..{self.last_day} {self.file_format}"
