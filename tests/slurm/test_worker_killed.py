"""A real Celery worker running the cycle against the real cluster is killed (SIGKILL) while it
carries a plan out; another worker takes over. Every job still runs exactly once: each of its
processes appends a line to a file of its own, and every file ends with one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from portal.celery import app
from scheduling.backends.slurm import job_dir
from scheduling.models import AcceleratorType, ClusterAccount, Job
from scheduling.services.jobs import JobSpec, job_submit
from scheduling.tasks import fleet_cycle
from tenants.models import Department, FleetPolicy, Membership, PriorityClass, Quota, Team
from tests.django_fixtures import ROOT
from tests.slurm.conftest import Cluster

pytestmark = [pytest.mark.slurm]

JOBS = 24
ONCE = 'echo "$(date +%s.%N) $SLURM_JOB_ID" >> "$FLEETLINE_CHECKPOINT_DIR/../began"; sleep 2'


def _worker(env: dict[str, str]) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "portal", "worker", "--pool=solo", "--loglevel=WARNING"]
        + ["-Q", "cycle", "-n", f"slurm-{uuid.uuid4().hex[:6]}@%h", "--without-gossip", "--without-mingle"],
        cwd=ROOT,
        env=env,
    )
    deadline = time.monotonic() + 30
    while not app.control.ping(timeout=0.5):
        assert process.poll() is None and time.monotonic() < deadline, "the Celery worker did not come up"
    return process


@pytest.fixture
def worker_env(cluster: Cluster, subprocess_env: dict[str, str]) -> Iterator[dict[str, str]]:
    app.control.purge()
    yield {
        **subprocess_env,
        "FLEETLINE_BACKEND": "slurm",
        "FLEET_CLOCK_SPEED": "1",
        "FLEETLINE_SLURM_URL": cluster.url,
        "FLEETLINE_SLURM_JWT_KEY": cluster.jwt_key,
        "FLEETLINE_SLURM_CONF": cluster.conf,
        "FLEETLINE_SLURM_SHARED_DIR": cluster.shared_dir,
        "FLEETLINE_SLURM_RUN_PREFIX": f"flkill-{uuid.uuid4().hex[:8]}-",
    }


def _fleet(cluster: Cluster) -> list[int]:
    h100, _ = AcceleratorType.objects.get_or_create(name="H100")  # the first tick read it from Slurm
    team = Team.objects.create(department=Department.objects.create(name="Research"), name="LM", slug="lm")
    Quota.objects.create(team=team, accelerator_type=h100, guaranteed=64, borrow_limit=0)
    FleetPolicy.objects.create(pk=FleetPolicy.SINGLETON_ID)
    training = PriorityClass.objects.create(name="training", value=300, kind="training", preemptible=True)
    lead = User.objects.create_user("lead")
    Membership.objects.create(user=lead, team=team, role="lead")
    ClusterAccount.objects.create(user=lead, username=cluster.users[0])
    spec = dict(kind="training", priority_class_id=training.pk, accelerator_type_id=h100.pk, gpus=1, duration_s=60.0)
    return [
        job_submit(team=team, spec=JobSpec(name=f"once-{i}", time_limit_s=60.0, command=ONCE, **spec), user=lead).pk
        for i in range(JOBS)
    ]


def test_a_worker_killed_while_it_carries_a_plan_out_starts_nothing_twice(
    cluster: Cluster, worker_env: dict[str, str], settings: Any
) -> None:
    settings.FLEETLINE_BACKEND = "slurm"  # as the workers run: jobs are commands
    prefix = worker_env["FLEETLINE_SLURM_RUN_PREFIX"]
    first = _worker(worker_env)
    try:
        fleet_cycle.delay().get(timeout=30)  # the clock starts and the fleet is read from Slurm
        ids = _fleet(cluster)
        fleet_cycle.delay()
        # Kill it the moment its first run exists in Slurm: mid-apply (runs held, the tick not yet
        # committed) or just after (committed, not all released).
        deadline = time.monotonic() + 30
        while not cluster.client.jobs(prefix):
            assert time.monotonic() < deadline, "the worker never submitted a run"
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
        # It died with runs held in Slurm: submitted, not yet released (nothing of them ran).
        assert any(run.held for run in cluster.client.jobs(prefix))
    finally:
        if first.poll() is None:
            first.kill()
    second = _worker(worker_env)
    try:
        deadline = time.monotonic() + 120
        while Job.objects.filter(pk__in=ids, state=Job.State.COMPLETED).count() < JOBS:
            assert time.monotonic() < deadline, "the jobs did not all complete"
            fleet_cycle.delay()
            time.sleep(1.0)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=20)
    shared = worker_env["FLEETLINE_SLURM_SHARED_DIR"]
    lines = {i: Path(job_dir(shared, prefix, i), "began").read_text().splitlines() for i in ids}
    assert {i: len(began) for i, began in lines.items()} == dict.fromkeys(ids, 1)
