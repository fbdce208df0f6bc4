"""Demo quotas, priority classes and policy for the demo teams (``portal.demo``)."""

from __future__ import annotations

from django.db import transaction

from fleet.models import AcceleratorType
from tenants.models import FleetPolicy, PriorityClass, Quota, Team

# (name, value, kind, preemptible, may_preempt). Serving is never a victim and takes GPUs from
# training and batch when its demand rises; training evicts lower classes and reclaims its team's
# guarantee from borrowers; batch scavenges: it runs on what is free and never evicts anyone.
DEFAULT_PRIORITY_CLASSES = (
    ("serving-critical", 1000, PriorityClass.Kind.SERVING, False, True),
    ("serving", 900, PriorityClass.Kind.SERVING, False, True),
    ("training-high", 500, PriorityClass.Kind.TRAINING, True, True),
    ("training", 300, PriorityClass.Kind.TRAINING, True, True),
    ("batch", 100, PriorityClass.Kind.BATCH, True, False),
)
# slug -> {accelerator: (guaranteed, borrow_limit, lend_limit)}; per type the guarantees sum to
# 224 of the demo fleet's 256 GPUs, leaving room for a quota request to be approved.
DEMO_QUOTAS: dict[str, dict[str, tuple[int, int, int | None]]] = {
    "language-models": {"H100": (128, 64, None), "A100": (32, 32, None)},
    "vision": {"H100": (32, 32, None), "A100": (96, 64, None)},
    "search-serving": {"H100": (48, 0, 0), "A100": (32, 0, 0)},
    "recommendations": {"H100": (16, 32, None), "A100": (64, 32, None)},
}


@transaction.atomic
def demo_quotas_seed() -> None:
    """Quotas for the demo teams, the default priority classes and the policy row. Idempotent."""
    FleetPolicy.objects.get_or_create(pk=FleetPolicy.SINGLETON_ID)
    for name, value, kind, preemptible, may_preempt in DEFAULT_PRIORITY_CLASSES:
        PriorityClass.objects.get_or_create(
            name=name,
            defaults={"value": value, "kind": kind, "preemptible": preemptible, "may_preempt": may_preempt},
        )
    types = {t.name: t for t in AcceleratorType.objects.all()}
    for team in Team.objects.filter(slug__in=DEMO_QUOTAS):
        for type_name, (guaranteed, borrow_limit, lend_limit) in DEMO_QUOTAS[team.slug].items():
            if type_name in types:
                Quota.objects.get_or_create(
                    team=team,
                    accelerator_type=types[type_name],
                    defaults={"guaranteed": guaranteed, "borrow_limit": borrow_limit, "lend_limit": lend_limit},
                )
