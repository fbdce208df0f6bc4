from __future__ import annotations

from django.apps import AppConfig


class FinanceConfig(AppConfig):
    name = "finance"
    verbose_name = "Finance: rates, budgets, closed months"
    default_auto_field = "django.db.models.BigAutoField"
