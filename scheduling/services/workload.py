"""A demo workload so that a fresh installation shows a busy, moving fleet: Poisson arrivals
per team with gang sizes and durations shaped like the public ITP GPU-cluster traces."""

from __future__ import annotations

import math
import random

import redis
from django.conf import settings
from django.db import transaction
from django.db.models import Sum

from scheduling.models import AcceleratorType, Job, JobKind, Node
from scheduling.services.jobs import JobSpec, fleet_now_s, job_submit
from tenants.models import PriorityClass, Team

CURSOR_KEY = "fleetline:demo:until_s"
GANG_SIZES = ((1, 0.45), (2, 0.10), (4, 0.15), (8, 0.18), (16, 0.07), (32, 0.04), (64, 0.01))
MEDIAN_DURATION_S = 3600.0
DURATION_SIGMA = 1.5
MAX_DURATION_S = 48 * 3600.0
MAX_PENDING_PER_TEAM = 40
MAX_CATCH_UP_S = 3600.0


def _arrivals(rng: random.Random, rate_per_s: float, window_s: float) -> int:
    """Poisson-distributed count by inversion (small means only)."""
    mean, count = rate_per_s * window_s, 0
    threshold, product = math.exp(-mean), rng.random()
    while product > threshold:
        count += 1
        product *= rng.random()
    return count


def _spec(
    rng: random.Random, accelerator: AcceleratorType, priority: PriorityClass, per_node: int, installed: int
) -> JobSpec:
    sizes, weights = zip(*GANG_SIZES, strict=True)
    gpus = min(rng.choices(sizes, weights)[0], installed)  # a small fleet gets smaller gangs
    if gpus > per_node:
        gpus -= gpus % per_node
    duration = min(MAX_DURATION_S, max(120.0, rng.lognormvariate(math.log(MEDIAN_DURATION_S), DURATION_SIGMA)))
    limit_h = math.ceil(duration * rng.uniform(1.1, 2.0) / 3600.0)
    return JobSpec(
        name=f"{'pretrain' if gpus >= 16 else 'finetune' if gpus >= 4 else 'experiment'}-{rng.randrange(10**5):05d}",
        kind=JobKind.TRAINING,
        priority_class_id=priority.pk,
        accelerator_type_id=accelerator.pk,
        gpus=gpus,
        duration_s=duration,
        time_limit_s=limit_h * 3600.0,
        checkpoint_interval_s=1800.0,
        checkpoint_gb=2.0 * gpus,
        min_gpus=max(1, gpus // 2) if gpus >= 8 and rng.random() < 0.2 else None,
    )


def demo_load_generate(*, offered_load: float = 0.9, seed: int = 7) -> int:
    """Submit the arrivals that fall between the last call and the fleet clock's now."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    now = fleet_now_s()
    since = float(client.get(CURSOR_KEY) or now)
    since = max(since, now - MAX_CATCH_UP_S)
    if now <= since:
        client.set(CURSOR_KEY, now)
        return 0
    teams = [team for team in Team.objects.order_by("id") if not team.deployments.exists()]
    priority = PriorityClass.objects.filter(kind=JobKind.TRAINING).order_by("value").first()
    accelerators = list(AcceleratorType.objects.filter(nodes__isnull=False).distinct().order_by("name"))
    if not teams or priority is None or not accelerators:
        return 0
    capacity = Node.objects.aggregate(total=Sum("gpus"))["total"] or 0
    mean_gpu_s = sum(g * w for g, w in GANG_SIZES) * MEDIAN_DURATION_S * math.exp(DURATION_SIGMA**2 / 2)
    rate_per_team = offered_load * capacity / mean_gpu_s / len(teams)
    rng = random.Random(f"{seed}:{since:.0f}")
    submitted = 0
    with transaction.atomic():
        for team in teams:
            if Job.objects.filter(team=team, state=Job.State.PENDING).count() >= MAX_PENDING_PER_TEAM:
                continue
            accelerator = accelerators[team.pk % len(accelerators)]
            nodes = Node.objects.filter(accelerator_type=accelerator)
            per_node = nodes.values_list("gpus", flat=True).first() or 8
            installed = nodes.aggregate(total=Sum("gpus"))["total"] or per_node
            for _ in range(_arrivals(rng, rate_per_team, now - since)):
                job_submit(team=team, spec=_spec(rng, accelerator, priority, per_node, installed), user=None)
                submitted += 1
    client.set(CURSOR_KEY, now)
    return submitted
