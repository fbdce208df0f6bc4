from __future__ import annotations

import pytest
from django.db.models import Sum

from portal.demo import demo_seed
from scheduling.models import Node
from tenants.models import FleetPolicy, PriorityClass, Quota
from tenants.services import demo_quotas_seed

pytestmark = pytest.mark.django_db


def test_the_demo_seed_gives_every_demo_team_quotas_within_fleet_capacity() -> None:
    demo_seed()
    demo_quotas_seed()
    demo_quotas_seed()  # idempotent
    assert Quota.objects.values("team").distinct().count() == 4
    for name in ("H100", "A100"):
        guaranteed = Quota.objects.filter(accelerator_type__name=name).aggregate(s=Sum("guaranteed"))["s"]
        fleet = Node.objects.filter(accelerator_type__name=name).aggregate(s=Sum("gpus"))["s"]
        assert 0 < guaranteed <= fleet
    assert list(PriorityClass.objects.values_list("name", "value")) == [
        ("serving-critical", 1000),
        ("serving", 900),
        ("training-high", 500),
        ("training", 300),
        ("batch", 100),
    ]
    # Serving is never a victim and takes GPUs from training as its demand rises; training evicts
    # lower classes and reclaims guarantees; batch only ever runs on free GPUs.
    assert list(PriorityClass.objects.values_list("name", "kind", "preemptible", "may_preempt")) == [
        ("serving-critical", "serving", False, True),
        ("serving", "serving", False, True),
        ("training-high", "training", True, True),
        ("training", "training", True, True),
        ("batch", "batch", True, False),
    ]
    assert FleetPolicy.objects.get().guarantee_overcommit_ratio == 1.0
