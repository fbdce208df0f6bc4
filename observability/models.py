from __future__ import annotations

from django.db import models


class CounterCheckpoint(models.Model):
    """Totals of one /metrics counter source over its rows up to ``upto_id``
    (``observability.counters``): ``[[key...], [value...]]`` pairs."""

    name = models.CharField(max_length=50, primary_key=True)
    upto_id = models.BigIntegerField(default=0)
    totals = models.JSONField(default=list)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.name} up to row {self.upto_id}"
