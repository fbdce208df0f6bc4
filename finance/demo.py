"""Demo prices and budgets, so that the demo's chargeback report has money in it. Part of the
demo only (``portal.demo.demo_seed``)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from finance.models import Budget, Rate
from fleet.models import AcceleratorType
from tenants.models import Team

# Prices per GPU-hour from a day long before any demo fleet's epoch.
DEMO_RATES = (("H100", Decimal("2.50")), ("A100", Decimal("1.60")))
# (team slug, unit, monthly amount)
DEMO_BUDGETS = (
    ("language-models", Budget.Unit.MONEY, Decimal("250000")),
    ("vision", Budget.Unit.GPU_HOURS, Decimal("40000")),
    ("search-serving", Budget.Unit.MONEY, Decimal("90000")),
)


def finance_demo_seed() -> None:
    for name, price in DEMO_RATES:
        accelerator = AcceleratorType.objects.filter(name=name).first()
        if accelerator is not None:
            Rate.objects.get_or_create(
                accelerator_type=accelerator, effective_from=date(2000, 1, 1), defaults={"price_per_gpu_hour": price}
            )
    for slug, unit, amount in DEMO_BUDGETS:
        team = Team.objects.filter(slug=slug).first()
        if team is not None:
            Budget.objects.get_or_create(team=team, defaults={"unit": unit, "monthly_amount": amount})
