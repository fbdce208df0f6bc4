"""The Slurm backend on the real local cluster (``deploy/slurm/devcluster.sh``): Fleetline decides,
Slurm runs the processes exactly where the plan put them, and what really happened comes back."""

from __future__ import annotations

import os
import pwd
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import TestCase
from django.utils import timezone
from rest_framework.test import APIClient

from scheduling import backends
from scheduling.backends.slurm import job_dir, run_name
from scheduling.backends.slurm_api import SlurmJob
from scheduling.cycle.tick import cycle_tick
from scheduling.models import ClusterAccount, Incident, Job, JobUsage, Node
from scheduling.services.nodes import node_action
from tenants.models import Team
from tests.factories import (
    AcceleratorTypeFactory,
    FleetPolicyFactory,
    MembershipFactory,
    PriorityClassFactory,
    QuotaFactory,
    TeamFactory,
    UserFactory,
)
from tests.slurm.conftest import Cluster

pytestmark = [pytest.mark.slurm, pytest.mark.django_db]

# A job that does its work in steps, checkpoints every few steps and on SIGUSR1 (then leaves),
# and resumes from its last checkpoint: what a real training job does, in bash.
STEPPING = r"""
step=0
[ -f "$FLEETLINE_CHECKPOINT_DIR/step" ] && step=$(cat "$FLEETLINE_CHECKPOINT_DIR/step")
echo "$step" > "$FLEETLINE_CHECKPOINT_DIR/../resumed.$FLEETLINE_RESTART_COUNT.$FLEETLINE_RANK"
save() { [ "$FLEETLINE_RANK" = 0 ] && echo "$step" > "$FLEETLINE_CHECKPOINT_DIR/step"; }
trap 'save; exit 0' USR1
while [ "$step" -lt STEPS ]; do
  sleep 0.5 & wait $!
  step=$((step + 1))
  echo "$(date +%s.%N) $step" >> "$FLEETLINE_PROGRESS_FILE"
  [ $((step % 4)) = 0 ] && save
done
"""


@dataclass
class Fleetline:
    cluster: Cluster
    lead: User
    team_slug: str
    api: APIClient
    prefix: str
    borrower_api: APIClient
    token: int = 0
    started: float = field(default_factory=time.time)

    def tick(self) -> None:
        self.token += 1
        with TestCase.captureOnCommitCallbacks(execute=True):
            cycle_tick(token=self.token, wall_now=timezone.now())

    def submit(
        self, *, gpus: int, command: str, time_limit_s: float = 300.0, as_borrower: bool = False, **extra: Any
    ) -> Job:
        api, team = (self.borrower_api, "vision") if as_borrower else (self.api, self.team_slug)
        body = {
            "team": team,
            "name": extra.pop("name", f"job-{gpus}"),
            "priority_class": extra.pop("priority_class", "training"),
            "accelerator": "H100",
            "gpus": gpus,
            "time_limit_s": time_limit_s,
            "command": command,
            **extra,
        }
        response = api.post("/api/v1/jobs/", body, format="json")
        assert response.status_code == 201, response.content
        return Job.objects.get(pk=response.json()["id"])

    def until(self, done: Callable[[], bool], *, timeout_s: float = 60.0, what: str = "") -> float:
        """Tick every quarter second until ``done``; returns the seconds it took."""
        start = time.monotonic()
        while not done():
            assert time.monotonic() - start < timeout_s, f"not within {timeout_s:.0f} s: {what}"
            self.tick()
            time.sleep(0.25)
        return time.monotonic() - start

    def run_of(self, job: Job) -> SlurmJob | None:
        job.refresh_from_db()
        name = run_name(self.prefix, job.pk, job.restarts)
        named = [r for r in self.cluster.client.jobs(name) if r.name == name]
        return named[-1] if named else None

    def folder(self, job: Job) -> Path:
        return job_dir(self.cluster.shared_dir, self.prefix, job.pk)


@pytest.fixture
def fleetline(cluster: Cluster, settings: Any) -> Iterator[Fleetline]:
    settings.FLEETLINE_BACKEND = "slurm"
    settings.FLEETLINE_SLURM_URL = cluster.url
    settings.FLEETLINE_SLURM_JWT_KEY = cluster.jwt_key
    settings.FLEETLINE_SLURM_CONF = cluster.conf
    settings.FLEETLINE_SLURM_SHARED_DIR = cluster.shared_dir
    settings.FLEETLINE_CLUSTER_ACCOUNTS = {}
    # Job ids start again in every test's database: a name of its own keeps each test's runs apart.
    prefix = settings.FLEETLINE_SLURM_RUN_PREFIX = f"fltest-{uuid.uuid4().hex[:8]}-"
    backends._backend.cache_clear()
    AcceleratorTypeFactory(name="H100")
    team = TeamFactory(name="Language Models", slug="language-models")
    QuotaFactory(team=team, accelerator_type__name="H100", guaranteed=64, borrow_limit=0)
    FleetPolicyFactory(preemption_grace_s=5.0)
    PriorityClassFactory(name="training", value=300, kind="training", preemptible=True)
    PriorityClassFactory(name="urgent", value=900, kind="training", preemptible=False, may_preempt=True)
    lead = UserFactory(username="lead")
    MembershipFactory(user=lead, team=team, role="lead")
    ClusterAccount.objects.create(user=lead, username=cluster.users[0])
    api = APIClient()
    api.force_authenticate(lead)
    # A second team that owns nothing and borrows the first team's idle GPUs.
    vision = TeamFactory(name="Vision", slug="vision")
    QuotaFactory(team=vision, accelerator_type__name="H100", guaranteed=0, borrow_limit=64)
    borrower = UserFactory(username="borrower")
    MembershipFactory(user=borrower, team=vision, role="lead")
    ClusterAccount.objects.create(user=borrower, username=cluster.users[1])
    borrower_api = APIClient()
    borrower_api.force_authenticate(borrower)
    fleet = Fleetline(cluster, lead, team.slug, api, prefix, borrower_api)
    fleet.tick()  # the first tick starts the clock and reads the fleet
    yield fleet
    for run in cluster.client.jobs(prefix):
        if run.end_unix is None:
            cluster.client.cancel(run.job_id)
    backends._backend.cache_clear()


def test_the_fleet_is_slurms_nodes_gpus_racks_and_pods(fleetline: Fleetline) -> None:
    nodes = {n.name: n for n in Node.objects.select_related("rack__pod", "accelerator_type")}
    assert sorted(nodes) == [f"node0{i}" for i in range(1, 9)]
    assert {n.gpus for n in nodes.values()} == {8}
    assert {n.rack.name for n in nodes.values()} == {"rack1", "rack2"}
    assert nodes["node01"].rack.name == nodes["node04"].rack.name != nodes["node05"].rack.name
    assert {n.rack.pod.name for n in nodes.values()} == {"spine"}
    assert all(n.state == Node.State.UP for n in nodes.values())


def test_a_gang_runs_on_the_two_nodes_the_plan_chose_as_its_submitter(fleetline: Fleetline) -> None:
    command = (
        'echo "$SLURMD_NODENAME $FLEETLINE_RANK $FLEETLINE_WORLD_SIZE $CUDA_VISIBLE_DEVICES $(id -u)"'
        ' > "$FLEETLINE_CHECKPOINT_DIR/../rank.$FLEETLINE_RANK"; sleep 1'
    )
    job = fleetline.submit(gpus=16, command=command)
    fleetline.until(lambda: Job.objects.get(pk=job.pk).state == Job.State.RUNNING, what="the gang is placed")
    planned = sorted(job.allocations.values_list("node__name", flat=True))
    fleetline.until(lambda: Job.objects.get(pk=job.pk).state == Job.State.COMPLETED, what="the gang completes")
    ranks = sorted((fleetline.folder(job) / f"rank.{r}").read_text().split() for r in (0, 1))
    uid = str(pwd.getpwnam(fleetline.cluster.users[0]).pw_uid)
    assert [r[0] for r in ranks] == planned
    assert [r[1:] for r in ranks] == [["0", "2", "0,1,2,3,4,5,6,7", uid], ["1", "2", "0,1,2,3,4,5,6,7", uid]]
    assert uid != "0"
    job.refresh_from_db()
    assert job.exit_code == 0 and job.cluster_account == fleetline.cluster.users[0]


def test_a_gang_that_cannot_fit_whole_runs_nowhere(fleetline: Fleetline) -> None:
    big = fleetline.submit(gpus=48, command="sleep 30", name="big")
    fleetline.until(lambda: Job.objects.get(pk=big.pk).state == Job.State.RUNNING, what="the big gang runs")
    waiting = fleetline.submit(gpus=24, command="sleep 1", name="waits")
    for _ in range(6):
        fleetline.tick()
        time.sleep(0.25)
    waiting.refresh_from_db()
    assert waiting.state == Job.State.PENDING
    assert fleetline.cluster.client.jobs(f"{fleetline.prefix}{waiting.pk}.") == []


def test_a_job_that_exits_3_is_failed_with_exit_code_3(fleetline: Fleetline) -> None:
    job = fleetline.submit(gpus=1, command="exit 3")
    fleetline.until(lambda: Job.objects.get(pk=job.pk).state == Job.State.FAILED, what="the job fails")
    job.refresh_from_db()
    assert job.exit_code == 3
    assert job.events.filter(kind="failed", message__contains="exit code 3").exists()
    page = fleetline.api.get(f"/api/v1/jobs/{job.pk}/").json()
    assert (page["state"], page["exit_code"]) == ("failed", 3)


def test_a_user_with_no_cluster_account_is_refused_with_a_clear_message(fleetline: Fleetline) -> None:
    member = UserFactory(username="member")
    MembershipFactory(user=member, team=Team.objects.get(slug=fleetline.team_slug))
    api = APIClient()
    api.force_authenticate(member)
    body = {
        "team": fleetline.team_slug,
        "name": "x",
        "priority_class": "training",
        "accelerator": "H100",
        "gpus": 1,
        "time_limit_s": 60,
        "command": "true",
    }
    response = api.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 400
    assert "no account on the cluster" in response.content.decode()
    assert not Job.objects.filter(name="x").exists()


def test_cancel_in_fleetline_cancels_in_slurm(fleetline: Fleetline) -> None:
    job = fleetline.submit(gpus=8, command="sleep 60")
    fleetline.until(lambda: (r := fleetline.run_of(job)) is not None and r.state == "RUNNING", what="it runs")
    assert fleetline.api.post(f"/api/v1/jobs/{job.pk}/cancel/").status_code in (200, 202)
    fleetline.until(
        lambda: (r := fleetline.run_of(job)) is not None and r.state == "CANCELLED", what="Slurm cancels it"
    )
    job.refresh_from_db()
    assert job.state == Job.State.CANCELLED


def test_a_preempted_job_checkpoints_on_the_signal_and_its_next_run_resumes_from_it(fleetline: Fleetline) -> None:
    low = fleetline.submit(
        gpus=64, command=STEPPING.replace("STEPS", "400"), name="low", checkpoint_on_preempt=True, as_borrower=True
    )
    fleetline.until(lambda: (r := fleetline.run_of(low)) is not None and r.state == "RUNNING", what="low runs")
    time.sleep(3)
    urgent = fleetline.submit(gpus=8, command="sleep 2", name="urgent")
    fleetline.until(
        lambda: Job.objects.get(pk=urgent.pk).state != Job.State.PENDING, timeout_s=90, what="urgent starts"
    )
    fleetline.until(lambda: Job.objects.get(pk=low.pk).restarts == 1, timeout_s=60, what="low is requeued")
    saved = int((fleetline.folder(low) / "checkpoint" / "step").read_text())
    assert saved > 0
    fleetline.until(lambda: (fleetline.folder(low) / "resumed.1.0").exists(), timeout_s=90, what="low runs again")
    assert int((fleetline.folder(low) / "resumed.1.0").read_text()) == saved


def test_a_dead_node_is_noticed_and_its_gang_restarts_elsewhere_from_its_checkpoint(fleetline: Fleetline) -> None:
    job = fleetline.submit(gpus=16, command=STEPPING.replace("STEPS", "400"), name="gang")
    fleetline.until(lambda: (r := fleetline.run_of(job)) is not None and r.state == "RUNNING", what="the gang runs")
    time.sleep(3)  # a checkpoint or two
    victim = sorted(job.allocations.values_list("node__name", flat=True))[1]
    killed = time.monotonic()
    fleetline.cluster.kill_node(victim)
    try:
        fleetline.until(
            lambda: Incident.objects.filter(node__name=victim, kind=Incident.Kind.DEAD).exists(),
            timeout_s=60,
            what="dead noticed",
        )
        assert not Incident.objects.filter(kind=Incident.Kind.SLOW).exists()  # dead, not slow; nor its peer
        detected_s = time.monotonic() - killed
        fleetline.until(lambda: (fleetline.folder(job) / "resumed.1.0").exists(), timeout_s=60, what="restarted")
        job.refresh_from_db()
        assert victim not in job.allocations.values_list("node__name", flat=True)
        assert job.restarts == 1
        assert int((fleetline.folder(job) / "resumed.1.0").read_text()) > 0
        assert detected_s < 30
    finally:
        fleetline.cluster.restart_node(victim)
    # Back in the fleet: up, or cordoned if Slurm drained it for what the kill left behind.
    fleetline.until(lambda: Node.objects.get(name=victim).state != Node.State.DOWN, timeout_s=60, what="node back")


def test_the_ledger_of_a_run_equals_sacct(fleetline: Fleetline) -> None:
    job = fleetline.submit(gpus=8, command="sleep 4")
    fleetline.until(lambda: Job.objects.get(pk=job.pk).state == Job.State.COMPLETED, what="it completes")
    deadline = time.monotonic() + 20
    while True:
        records = fleetline.cluster.client.accounting_jobs(
            fleetline.started - 60, time.time() + 60, name_prefix=run_name(fleetline.prefix, job.pk, 0)
        )
        if records and records[0].end_unix:
            break
        assert time.monotonic() < deadline, "sacct never showed the run"
        time.sleep(0.5)
    sacct_gpu_s = records[0].elapsed_s * records[0].gpus
    ledger_gpu_s = sum(JobUsage.objects.filter(job=job).values_list("allocated_gpu_s", flat=True))
    assert records[0].gpus == 8
    assert abs(ledger_gpu_s - sacct_gpu_s) <= 8 * 1.5  # within one tick (and sacct's whole seconds)


def _job_processes(job: Job, node: str) -> list[int]:
    """The job's own processes on ``node``: its account's, with SLURMD_NODENAME (which Slurm sets
    in a job's environment) naming that node."""
    uid = pwd.getpwnam(job.cluster_account).pw_uid
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
            owner = proc.stat().st_uid
        except OSError:
            continue
        if owner != uid:
            continue
        if f"SLURMD_NODENAME={node}".encode() in environ and f"FLEETLINE_JOB_ID={job.pk}".encode() in environ:
            pids.append(int(proc.name))
    return pids


def test_a_throttled_node_is_detected_slow_not_dead_and_its_gang_moves_off_it(fleetline: Fleetline) -> None:
    job = fleetline.submit(gpus=16, command=STEPPING.replace("STEPS", "400"), name="gang")
    fleetline.until(lambda: (r := fleetline.run_of(job)) is not None and r.state == "RUNNING", what="the gang runs")
    time.sleep(4)  # some steps at full pace on both nodes
    slow = sorted(job.allocations.values_list("node__name", flat=True))[1]
    stop = threading.Event()

    def throttle() -> None:  # stopped 1 s of every 1.3 s: about 3x slower, still heartbeating
        while not stop.is_set():
            pids = _job_processes(job, slow)
            for pid in pids:
                os.kill(pid, signal.SIGSTOP)
            stop.wait(1.0)
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
            stop.wait(0.3)

    thread = threading.Thread(target=throttle, daemon=True)
    throttled = time.monotonic()
    thread.start()
    try:
        fleetline.until(lambda: Incident.objects.filter(node__name=slow).exists(), timeout_s=60, what="slow noticed")
        detected_s = time.monotonic() - throttled
    finally:
        stop.set()
        thread.join()
        for pid in _job_processes(job, slow):
            os.kill(pid, signal.SIGCONT)
    incident = Incident.objects.get(node__name=slow)
    assert incident.kind == Incident.Kind.SLOW and incident.slowdown > 1.3
    assert Node.objects.get(name=slow).state == Node.State.CORDONED  # cordoned, not down
    fleetline.until(lambda: Job.objects.get(pk=job.pk).restarts == 1, timeout_s=60, what="the gang leaves")
    fleetline.until(lambda: (fleetline.folder(job) / "resumed.1.0").exists(), timeout_s=60, what="it runs again")
    job.refresh_from_db()
    assert slow not in job.allocations.values_list("node__name", flat=True)
    assert job.events.filter(incident=incident, node__name=slow).exists()  # its history names the move
    assert detected_s < 30


def test_a_tick_that_dies_after_submitting_starts_nothing_twice(fleetline: Fleetline, monkeypatch: Any) -> None:
    job = fleetline.submit(gpus=8, command="sleep 2")

    def die(**kwargs: Any) -> None:
        raise RuntimeError("the worker died here")

    # The leader dies inside the tick after its runs were submitted (held), before it commits.
    monkeypatch.setattr("scheduling.cycle.tick.usage_record", die)
    with pytest.raises(RuntimeError):
        fleetline.tick()
    monkeypatch.undo()
    assert Job.objects.get(pk=job.pk).state == Job.State.PENDING  # rolled back
    name = run_name(fleetline.prefix, job.pk, 0)
    held = fleetline.cluster.client.jobs(name)
    assert [r.held for r in held] == [True]  # submitted held: nothing ran
    # The next leader commits, then dies before releasing what it held.
    backend = backends.backend_get()
    monkeypatch.setattr(backend, "after_commit", lambda: backend._to_release.clear())
    fleetline.tick()
    monkeypatch.undo()
    fleetline.until(lambda: Job.objects.get(pk=job.pk).state == Job.State.COMPLETED, what="it completes")
    runs = [r for r in fleetline.cluster.client.jobs(name) if r.name == name]
    assert [r.state for r in runs] == ["COMPLETED"]  # the held run was released, once: one run ever


def test_the_job_page_shows_the_failed_jobs_exit_code_and_command(fleetline: Fleetline, client: Any) -> None:
    job = fleetline.submit(gpus=1, command="echo failing; exit 3")
    fleetline.until(lambda: Job.objects.get(pk=job.pk).state == Job.State.FAILED, what="the job fails")
    client.force_login(fleetline.lead)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "Failed" in page and 'id="job-exit"' in page and ">3<" in page
    assert "echo failing; exit 3" in page and fleetline.cluster.users[0] in page


def test_a_cordon_in_fleetline_is_a_drain_in_slurm_and_an_uncordon_a_resume(fleetline: Fleetline) -> None:
    node = Node.objects.get(name="node03")

    def slurm_states() -> frozenset[str]:
        return next(n.states for n in fleetline.cluster.client.nodes() if n.name == "node03")

    node_action(node=node, action="cordon", actor=fleetline.lead, sim_now_s=0.0)
    fleetline.until(lambda: bool(slurm_states() & {"DRAIN", "DRAINED"}), timeout_s=20, what="drained in Slurm")
    node_action(node=Node.objects.get(name="node03"), action="uncordon", actor=fleetline.lead, sim_now_s=0.0)
    fleetline.until(lambda: not slurm_states() & {"DRAIN", "DRAINED"}, timeout_s=20, what="resumed in Slurm")
    assert Node.objects.get(name="node03").state == Node.State.UP
