"""Real execution on the local Slurm cluster (deploy/slurm/devcluster.sh): prints JSON.

Brings up its own cluster (8 nodes x 8 GPUs, 2 racks) under var/slurm-bench on ports of its own,
runs Fleetline's live cycle against it in this process (a tick every ``--interval`` seconds, as
the cycle leader does), and measures, on real processes:
- ``start_latency_s``: the deciding tick's commit -> the job's first process running (its own
  clock, written by the job), for gangs of 8 and 16 GPUs;
- ``slow_node``: a 16-GPU gang's node throttled (its processes stopped and continued in a duty
  cycle): MTTD (throttle -> slow incident; never dead) and when the gang runs elsewhere;
- ``dead_node``: a 16-GPU gang's node killed (slurmd and job processes): MTTD (kill -> incident)
  and MTTR (kill -> the gang's next run computing again from its checkpoint);
- ``preemption``: a borrowed 64-GPU job that checkpoints on SIGUSR1, preempted by an owner's
  job: work lost (GPU-s, from its real checkpoint) and the step it resumed at;
- ``throughput``: 500 one-GPU jobs: jobs started per second through Slurm (64 GPUs: in waves);
- ``ledger_vs_sacct``: every finished run's ledger GPU-seconds against sacct's elapsed x GPUs.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/fleetline_bench_slurm python benchmarks/slurm_exec.py
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SCRIPT = ROOT / "deploy" / "slurm" / "devcluster.sh"
CLUSTER_ENV = {
    "FLEETLINE_SLURM_DIR": str(ROOT / "var" / "slurm-bench"),
    "FLEETLINE_SLURM_CTLD_PORT": "6857",
    "FLEETLINE_SLURM_DBD_PORT": "6859",
    "FLEETLINE_SLURM_REST_PORT": "6860",
    "FLEETLINE_SLURM_SLURMD_PORT_BASE": "6941",
    "FLEETLINE_SLURM_MYSQL_PORT": "3347",
    "FLEETLINE_SLURM_USERS": "fl-lead fl-member",
}

STEPPING = r"""
date +%s.%N > "$FLEETLINE_CHECKPOINT_DIR/../began.$FLEETLINE_RESTART_COUNT.$FLEETLINE_RANK"
step=0
[ -f "$FLEETLINE_CHECKPOINT_DIR/step" ] && step=$(cat "$FLEETLINE_CHECKPOINT_DIR/step")
echo "$step" > "$FLEETLINE_CHECKPOINT_DIR/../resumed.$FLEETLINE_RESTART_COUNT.$FLEETLINE_RANK"
save() { [ "$FLEETLINE_RANK" = 0 ] && echo "$step" > "$FLEETLINE_CHECKPOINT_DIR/step"; }
trap 'save; exit 0' USR1
while [ "$step" -lt 100000 ]; do
  sleep 0.5 & wait $!
  step=$((step + 1))
  [ $((step % 10)) = 0 ] && save
done
"""
BEGIN = 'date +%s.%N > "$FLEETLINE_CHECKPOINT_DIR/../began.$FLEETLINE_RESTART_COUNT.$FLEETLINE_RANK"; sleep 3'


def devcluster(*args: str) -> str:
    done = subprocess.run(
        ["bash", str(SCRIPT), *args], env={**os.environ, **CLUSTER_ENV}, capture_output=True, text=True, check=True
    )
    return done.stdout


class Bench:
    def __init__(self, interval_s: float) -> None:
        from scheduling.backends import backend_get

        self.interval_s = interval_s
        self.token = int(time.time())
        self.backend: Any = backend_get()
        self.decided: dict[int, float] = {}
        self.failed_ticks: list[str] = []

    def tick(self) -> None:
        from django.utils import timezone

        from scheduling.backends.slurm_api import SlurmError
        from scheduling.cycle.tick import cycle_tick
        from scheduling.models import Job

        self.token += 1
        before = set(Job.objects.filter(state="running").values_list("id", flat=True))
        try:
            cycle_tick(token=self.token, wall_now=timezone.now())
        except SlurmError as error:  # as the leader does: the next tick tries again
            self.failed_ticks.append(str(error)[:200])
            return
        committed = time.time()
        for job_id in Job.objects.filter(state="running").exclude(id__in=before).values_list("id", flat=True):
            self.decided.setdefault(job_id, committed)

    def until(self, done: Any, timeout_s: float, what: str) -> None:
        from django.db.models import Count

        from scheduling.models import Job

        deadline = time.monotonic() + timeout_s
        while not done():
            if time.monotonic() > deadline:
                jobs = dict(Job.objects.values_list("state").annotate(n=Count("id")))
                runs: dict[str, int] = {}
                for run in self.backend.client.jobs(self.backend.prefix):
                    key = f"{run.state}{' held' if run.held else ''}"
                    runs[key] = runs.get(key, 0) + 1
                failed = self.failed_ticks[:3]
                raise SystemExit(f"not within {timeout_s:.0f} s: {what}; jobs {jobs}, runs {runs}, failures {failed}")
            started = time.monotonic()
            self.tick()
            time.sleep(max(0.0, self.interval_s - (time.monotonic() - started)))

    def folder(self, job_id: int) -> Path:
        from scheduling.backends.slurm import job_dir

        return job_dir(self.backend.shared_dir, self.backend.prefix, job_id)


def _seed(users: list[str], fleet_gpus: int) -> dict[str, Any]:
    from django.contrib.auth.models import User

    from scheduling.models import AcceleratorType, ClusterAccount, FleetClock
    from tenants.models import Department, FleetPolicy, Membership, PriorityClass, Quota, Team

    h100 = AcceleratorType.objects.create(name="H100")
    department = Department.objects.create(name="Research")
    owner = Team.objects.create(department=department, name="Owners", slug="owners")
    borrower = Team.objects.create(department=department, name="Borrowers", slug="borrowers")
    Quota.objects.create(team=owner, accelerator_type=h100, guaranteed=fleet_gpus, borrow_limit=0)
    Quota.objects.create(team=borrower, accelerator_type=h100, guaranteed=0, borrow_limit=fleet_gpus)
    FleetPolicy.objects.create(pk=FleetPolicy.SINGLETON_ID, preemption_grace_s=5.0)
    training = PriorityClass.objects.create(name="training", value=300, kind="training", preemptible=True)
    FleetClock.objects.create(pk=1, sim_now_s=0.0)
    people = {}
    for slug, team, account in (("lead", owner, users[0]), ("borrower", borrower, users[1])):
        user = User.objects.create_user(slug)
        Membership.objects.create(user=user, team=team, role="lead")
        ClusterAccount.objects.create(user=user, username=account)
        people[slug] = (user, team)
    return {"people": people, "training": training, "h100": h100}


def _submit(seeded: dict[str, Any], who: str, *, gpus: int, command: str, **extra: Any) -> int:
    from scheduling.services.jobs import JobSpec, job_submit

    user, team = seeded["people"][who]
    spec = JobSpec(
        name=extra.pop("name", f"{who}-{gpus}"),
        kind="training",
        priority_class_id=seeded["training"].pk,
        accelerator_type_id=seeded["h100"].pk,
        gpus=gpus,
        duration_s=600.0,
        time_limit_s=600.0,
        command=command,
        **extra,
    )
    return job_submit(team=team, spec=spec, user=user).pk


def _state(job_id: int) -> str:
    from scheduling.models import Job

    return Job.objects.get(pk=job_id).state


def start_latency(bench: Bench, seeded: dict[str, Any], runs: int) -> dict[str, Any]:
    latencies: dict[str, list[float]] = {"8": [], "16": []}
    for i in range(runs):
        for gpus in (8, 16):
            job_id = _submit(seeded, "lead", gpus=gpus, command=BEGIN, name=f"latency-{i}-{gpus}")
            began = bench.folder(job_id) / "began.0.0"
            bench.until(began.exists, 60, "a latency job begins")
            latencies[str(gpus)].append(float(began.read_text()) - bench.decided[job_id])
            bench.until(lambda j=job_id: _state(j) == "completed", 60, "a latency job completes")
    return {
        gpus: {"median": round(statistics.median(v), 3), "max": round(max(v), 3), "runs": len(v)}
        for gpus, v in latencies.items()
    }


def dead_node(bench: Bench, seeded: dict[str, Any]) -> dict[str, Any]:
    from scheduling.models import Incident, Job

    job_id = _submit(seeded, "lead", gpus=16, command=STEPPING, name="gang")
    bench.until((bench.folder(job_id) / "began.0.0").exists, 60, "the gang begins")
    time.sleep(6)  # a checkpoint
    node = sorted(Job.objects.get(pk=job_id).allocations.values_list("node__name", flat=True))[1]
    killed = time.time()
    devcluster("kill-node", node)
    bench.until(lambda: Incident.objects.filter(node__name=node).exists(), 90, "the dead node is noticed")
    detected = time.time()
    resumed = bench.folder(job_id) / "began.1.0"
    bench.until(resumed.exists, 90, "the gang runs again")
    restarted = float(resumed.read_text())
    step = int((bench.folder(job_id) / "resumed.1.0").read_text())
    devcluster("restart-node", node)
    from scheduling.services.jobs import job_cancel

    job_cancel(job=Job.objects.get(pk=job_id), user=seeded["people"]["lead"][0])
    bench.until(lambda: Job.objects.filter(state="running").count() == 0, 60, "the gang is cancelled")
    return {
        "gang_gpus": 16,
        "mttd_s": round(detected - killed, 2),
        "mttr_s": round(restarted - killed, 2),
        "resumed_at_step": step,
    }


def preemption(bench: Bench, seeded: dict[str, Any]) -> dict[str, Any]:
    from scheduling.models import Job, JobUsage

    low = _submit(seeded, "borrower", gpus=64, command=STEPPING, name="low", checkpoint_on_preempt=True)
    bench.until((bench.folder(low) / "began.0.0").exists, 60, "the borrowed job begins")
    time.sleep(8)
    asked = time.time()
    owner = _submit(seeded, "lead", gpus=8, command=BEGIN, name="owner")
    bench.until((bench.folder(owner) / "began.0.0").exists, 120, "the owner's job begins")
    owner_began = float((bench.folder(owner) / "began.0.0").read_text())
    bench.until(lambda: Job.objects.get(pk=low).restarts >= 1, 60, "the borrowed job is requeued")
    saved = int((bench.folder(low) / "checkpoint" / "step").read_text())
    bench.until((bench.folder(low) / "resumed.1.0").exists, 120, "the borrowed job runs again")
    lost = sum(JobUsage.objects.filter(job_id=low).values_list("lost_gpu_s", flat=True))
    resumed = int((bench.folder(low) / "resumed.1.0").read_text())
    from scheduling.services.jobs import job_cancel

    job_cancel(job=Job.objects.get(pk=low), user=seeded["people"]["borrower"][0])
    bench.until(lambda: Job.objects.filter(state="running").count() == 0, 60, "all cancelled")
    return {
        "owner_wait_s": round(owner_began - asked, 2),
        "checkpointed_step": saved,
        "resumed_at_step": resumed,
        "lost_gpu_s": round(lost, 1),
        "lost_gpu_s_per_gpu": round(lost / 64, 2),
    }


def _job_processes(job_id: int, node: str, account: str) -> list[int]:
    """The job's own processes on ``node``: its account's, with SLURMD_NODENAME naming the node."""
    import pwd

    uid, pids = pwd.getpwnam(account).pw_uid, []
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit() or proc.stat().st_uid != uid:
                continue
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"SLURMD_NODENAME={node}".encode() in environ and f"FLEETLINE_JOB_ID={job_id}".encode() in environ:
            pids.append(int(proc.name))
    return pids


def slow_node(bench: Bench, seeded: dict[str, Any]) -> dict[str, Any]:
    """A 16-GPU gang's second node throttled (its processes stopped 1 s of every 1.3 s, so its
    slurmd still answers): time until Fleetline flags it slow, and that it never calls it dead."""
    import signal
    import threading

    from scheduling.models import Incident, Job
    from scheduling.services.jobs import job_cancel

    progress = STEPPING.replace(
        "  step=$((step + 1))", '  step=$((step + 1)); echo "$(date +%s.%N) $step" >> "$FLEETLINE_PROGRESS_FILE"'
    )
    job_id = _submit(seeded, "lead", gpus=16, command=progress, name="gang-slow")
    bench.until((bench.folder(job_id) / "began.0.0").exists, 60, "the gang begins")
    time.sleep(5)
    job = Job.objects.get(pk=job_id)
    node = sorted(job.allocations.values_list("node__name", flat=True))[1]
    stop = threading.Event()

    def throttle() -> None:
        while not stop.is_set():
            pids = _job_processes(job_id, node, job.cluster_account)
            for pid in pids:
                os.kill(pid, signal.SIGSTOP)
            stop.wait(1.0)
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
            stop.wait(0.3)

    thread = threading.Thread(target=throttle, daemon=True)
    throttled = time.time()
    thread.start()
    try:
        bench.until(lambda: Incident.objects.filter(node__name=node).exists(), 90, "the slow node is noticed")
        detected = time.time()
    finally:
        stop.set()
        thread.join()
    incident = Incident.objects.get(node__name=node)
    bench.until((bench.folder(job_id) / "began.1.0").exists, 90, "the gang runs again elsewhere")
    moved = float((bench.folder(job_id) / "began.1.0").read_text())
    job_cancel(job=Job.objects.get(pk=job_id), user=seeded["people"]["lead"][0])
    bench.until(lambda: Job.objects.filter(state="running").count() == 0, 60, "the gang is cancelled")
    return {
        "mttd_s": round(detected - throttled, 2),
        "kind": incident.kind,
        "slowdown_seen": round(incident.slowdown, 2),
        "moved_off_after_s": round(moved - throttled, 2),
    }


def throughput(bench: Bench, seeded: dict[str, Any], jobs: int) -> dict[str, Any]:
    from scheduling.models import Job

    began = 'date +%s.%N > "$FLEETLINE_CHECKPOINT_DIR/../began.0.0"'
    ids = [_submit(seeded, "lead", gpus=1, command=began, name=f"burst-{i}") for i in range(jobs)]
    first = time.time()
    bench.tick()  # plans every start, submits them held, commits, releases them
    first_tick_s = time.time() - first
    bench.until(lambda: Job.objects.filter(pk__in=ids, state="completed").count() == jobs, 600, "the burst ends")
    last = time.time()
    # When each process really began, by its own clock (Slurm's start times are whole seconds).
    starts = sorted(float((bench.folder(i) / "began.0.0").read_text()) for i in ids)
    return {
        "jobs": jobs,
        "first_tick_s": round(first_tick_s, 2),
        "process_start_spread_s": round(starts[-1] - starts[0], 2),
        "jobs_started_per_s": round(jobs / max(1e-9, starts[-1] - first), 1),
        "wall_s": round(last - first, 2),
        "completed_per_s": round(jobs / (last - first), 1),
    }


def slurm_alone(bench: Bench, jobs: int, users: list[str]) -> dict[str, Any]:
    """Slurm's own rate on this box: the same one-GPU jobs submitted straight to slurmrestd (not
    held, Slurm's own scheduler placing them), several calls at once as Fleetline makes them."""
    from concurrent.futures import ThreadPoolExecutor

    client, shared = bench.backend.client, Path(bench.backend.shared_dir)
    name = f"{bench.backend.prefix}alone-"
    folder = shared / name
    folder.mkdir()
    folder.chmod(0o777)
    first = time.time()

    def submit(i: int) -> int:
        script = f"#!/bin/bash\ndate +%s.%N > {folder}/{i}\n"
        return int(client.submit(user=users[0], name=f"{name}{i}", script=script, cwd=str(shared), gpus_per_node=1))

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(submit, range(jobs)))
    submitted = time.time()
    deadline = time.monotonic() + 600
    while len(list(folder.iterdir())) < jobs:
        if time.monotonic() > deadline:
            raise SystemExit("Slurm alone did not start its jobs within 600 s")
        time.sleep(0.5)
    time.sleep(0.5)  # the last files written whole
    starts = sorted(float(path.read_text()) for path in folder.iterdir())
    return {
        "jobs": jobs,
        "submit_s": round(submitted - first, 2),
        "jobs_started_per_s": round(jobs / max(1e-9, starts[-1] - first), 1),
    }


def ledger_vs_sacct(bench: Bench, since: float) -> dict[str, Any]:
    from scheduling.backends.slurm import run_name
    from scheduling.models import Job, JobUsage

    records = {r.name: r for r in bench.backend.client.accounting_jobs(since - 60, time.time() + 60)}
    diffs = []
    for job_id, gpus in Job.objects.filter(state="completed").values_list("id", "gpus"):
        record = records.get(run_name(bench.backend.prefix, job_id, 0))
        if record is None or not record.end_unix:
            continue
        ledger = sum(JobUsage.objects.filter(job_id=job_id).values_list("allocated_gpu_s", flat=True))
        diffs.append(abs(ledger - record.elapsed_s * record.gpus) / gpus)
    return {
        "runs": len(diffs),
        "mean_abs_diff_s_per_gpu": round(statistics.mean(diffs), 3) if diffs else None,
        "max_abs_diff_s_per_gpu": round(max(diffs), 3) if diffs else None,
        "tick_interval_s": bench.interval_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between ticks (beat's default: 1)")
    parser.add_argument("--latency-runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--keep-cluster", action="store_true")
    parser.add_argument(
        "--gpus-per-node", type=int, default=8, help="fake GPUs per node (64: all 500 one-GPU jobs fit at once)"
    )
    parser.add_argument(
        "--only",
        choices=["latency", "preemption", "slow-node", "dead-node", "throughput"],
        action="append",
        help="these parts only",
    )
    args = parser.parse_args()
    CLUSTER_ENV["FLEETLINE_SLURM_GPUS_PER_NODE"] = str(args.gpus_per_node)
    parts = set(args.only or ["latency", "preemption", "slow-node", "dead-node", "throughput"])

    up_started = time.monotonic()
    devcluster("up")
    env = dict(line.removeprefix("export ").split("=", 1) for line in devcluster("env").splitlines() if "=" in line)
    cluster_up_s = time.monotonic() - up_started
    os.environ.update(
        DATABASE_URL=os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/fleetline_bench_slurm"),
        REDIS_URL=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/3"),
        DJANGO_SETTINGS_MODULE="portal.settings",
        SECRET_KEY="fleetline-benchmark-only-not-secret",
        FLEETLINE_DEMO="0",
        FLEETLINE_BACKEND="slurm",
        FLEETLINE_SLURM_URL=env["FLEETLINE_SLURM_URL"],
        FLEETLINE_SLURM_JWT_KEY=env["FLEETLINE_SLURM_JWT_KEY"],
        FLEETLINE_SLURM_CONF=env["SLURM_CONF"],
        FLEETLINE_SLURM_SHARED_DIR=env["FLEETLINE_SLURM_SHARED_DIR"],
        FLEETLINE_SLURM_RUN_PREFIX=f"flbench-{uuid.uuid4().hex[:6]}-",
        LOG_LEVEL="WARNING",
    )
    from harness import database_fresh

    database_fresh(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    try:
        seeded = _seed(CLUSTER_ENV["FLEETLINE_SLURM_USERS"].split(), 8 * args.gpus_per_node)
        bench = Bench(args.interval)
        since = time.time()
        bench.tick()
        result: dict[str, Any] = {
            "cluster_up_s": round(cluster_up_s, 1),
            "tick_interval_s": args.interval,
            "gpus_per_node": args.gpus_per_node,
        }
        if "latency" in parts:
            result["start_latency_s"] = start_latency(bench, seeded, args.latency_runs)
        if "preemption" in parts:
            result["preemption"] = preemption(bench, seeded)
        if "slow-node" in parts:
            result["slow_node"] = slow_node(bench, seeded)
        if "dead-node" in parts:
            result["dead_node"] = dead_node(bench, seeded)
        if "throughput" in parts:
            result["throughput"] = throughput(bench, seeded, args.jobs)
            result["slurm_alone"] = slurm_alone(bench, args.jobs, CLUSTER_ENV["FLEETLINE_SLURM_USERS"].split())
        result["ledger_vs_sacct"] = ledger_vs_sacct(bench, since)
        result["failed_ticks"] = {"count": len(bench.failed_ticks), "first": bench.failed_ticks[:3]}
        print(json.dumps(result, indent=2))
    finally:
        if not args.keep_cluster:
            devcluster("down")


if __name__ == "__main__":
    main()
