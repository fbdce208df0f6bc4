"""Who uses the fleet: departments (quota cohorts), teams and their members."""

from __future__ import annotations

from django.conf import settings
from django.db import models


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

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "team"], name="membership_unique_user_team"),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"
