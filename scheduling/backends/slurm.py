"""The Slurm backend: Fleetline decides, a real Slurm cluster runs the jobs (through slurmrestd).

The fleet is Slurm's: every tick reads its nodes (GPUs from gres, racks and pods from the
topology's switches, states) into the node table. A node Slurm reports down or not responding is
dead: it goes down with an incident, and the engine restarts its gangs elsewhere in the same plan.
Fleetline's cordon is a drain in Slurm (reason ``fleetline: ...``) and its uncordon a resume; a
node drained in Slurm by someone else shows as cordoned.

A run is one Slurm batch job named ``fleetline-<job>.<attempt>`` (attempt = restarts so far; the
prefix is ``FLEETLINE_SLURM_RUN_PREFIX``),
submitted as the job's cluster account (a token signed for that account), held, on exactly the
nodes of the plan (explicit node list; whole nodes exclusive; the GPUs per node as gres), never
requeued by Slurm itself. Each tick reconciles what runs with what the database says runs, by
name, inside the tick's transaction: a run the database wants and Slurm lacks is submitted held, a
held run it wants is released after commit, and a live run it no longer wants (cancelled, evicted,
timed out, a stale attempt) is cancelled. A retried tick or a new leader after a crash therefore
finds what an earlier one submitted instead of starting it twice, and nothing runs unless the tick
that decided it committed. Preemption: SIGUSR1 to the run when the plan preempts it (the job
checkpoints in ``FLEETLINE_CHECKPOINT_DIR``), and the run is stopped when its grace ends (or leaves
on its own after checkpointing); the next run resumes from that checkpoint.

Ends come back from Slurm with their real end and exit code: exit 0 completes the job, a time
limit times it out, any other end fails it with its exit code. The usage ledger charges every run
to its real end (``Observed``); the work a preempted or failed run loses is measured from its last
real checkpoint (the newest file in its checkpoint folder), not from a model.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction
from django.db.models import F

from scheduling.backends.base import Observed
from scheduling.backends.slurm_api import SlurmClient, SlurmError, SlurmJob, SlurmNode
from scheduling.convert import policy_from_row
from scheduling.cycle.causes import eviction_causes, incident_cause, is_failure
from scheduling.cycle.failures import detector_policy, job_requeue_at
from scheduling.job_release import allocations_release
from scheduling.models import AcceleratorType, Allocation, Incident, Job, Node, Pod, Rack, SchedulerEvent
from scheduling.tick_outcome import FinishedRun, JobChange
from tenants.selectors import fleet_policy_for_cycle

if TYPE_CHECKING:
    from scheduling.cycle.snapshot import Loaded
    from scheduling.tick_outcome import AppliedTick

logger = logging.getLogger("fleetline.slurm")

DRAIN_REASON = "fleetline: cordoned"
# Slurm node states that mean the machine is gone (Fleetline's dead), and that it is drained.
DEAD_STATES = frozenset({"DOWN", "NOT_RESPONDING", "FAIL", "FAILING", "POWERED_DOWN", "UNKNOWN"})
DRAIN_STATES = frozenset({"DRAIN", "DRAINED", "DRAINING"})
# Slurm job states of a run that is still there (held, starting, running, being signalled).
LIVE_STATES = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING"})
DEFAULT_RACK, DEFAULT_POD = "rack-default", "pod-default"
# Calls to slurmrestd made at once when a tick starts, releases or stops many runs.
PARALLEL_CALLS = 8

# The batch script of every run, the same text for every job: the job's own command is data
# (``FLEETLINE_COMMAND`` in the environment). On one node the batch shell becomes it; on several,
# one task per node runs it through srun, which hands each rank its GPUs (CUDA_VISIBLE_DEVICES) and
# its rank layout, and forwards the preemption signal.
WRAPPER = """#!/bin/bash
mkdir -p "$FLEETLINE_CHECKPOINT_DIR" "$FLEETLINE_PROGRESS_DIR"
if [ "$SLURM_JOB_NUM_NODES" = 1 ]; then
  export FLEETLINE_RANK=0 FLEETLINE_WORLD_SIZE=1 FLEETLINE_NODE_RANK=0 \
    FLEETLINE_PROGRESS_FILE="$FLEETLINE_PROGRESS_DIR/$SLURMD_NODENAME.0"
  exec /bin/bash -c "$FLEETLINE_COMMAND"
fi
exec srun --kill-on-bad-exit=1 --export=ALL /bin/bash -c 'export FLEETLINE_RANK=$SLURM_PROCID \
FLEETLINE_WORLD_SIZE=$SLURM_NTASKS FLEETLINE_NODE_RANK=$SLURM_NODEID \
FLEETLINE_PROGRESS_FILE=$FLEETLINE_PROGRESS_DIR/$SLURMD_NODENAME.$SLURM_PROCID; exec /bin/bash -c "$FLEETLINE_COMMAND"'
"""


def run_name(prefix: str, job_id: int, attempt: int) -> str:
    """A run's name in Slurm: ``<prefix><job>.<attempt>``; the prefix (``FLEETLINE_SLURM_RUN_PREFIX``)
    tells one Fleetline installation's runs from any other's on the same cluster."""
    return f"{prefix}{job_id}.{attempt}"


def job_dir(shared_dir: str, prefix: str, job_id: int) -> Path:
    """The job's folder on the shared storage, kept across its runs: ``checkpoint/`` and ``progress/``."""
    return Path(shared_dir) / f"{prefix}{job_id}"


def last_checkpoint_unix(folder: Path) -> float | None:
    """When the job last wrote into its checkpoint folder (the newest file's mtime), if ever."""
    folder = folder / "checkpoint"
    try:
        times = [entry.stat().st_mtime for entry in folder.iterdir() if entry.is_file()]
    except OSError:
        return None
    return max(times, default=None)


@dataclass(frozen=True, slots=True)
class _Clock:
    """One tick's pairing of fleet time and wall time (speed 1), to convert Slurm's Unix times."""

    sim_s: float
    unix_s: float

    def fleet(self, unix_s: float) -> float:
        return self.sim_s + (unix_s - self.unix_s)

    def unix(self, fleet_s: float) -> float:
        return self.unix_s + (fleet_s - self.sim_s)


@dataclass(frozen=True, slots=True)
class _End:
    """How a run that Slurm reports ended leaves in Fleetline."""

    state: str
    event: str
    message: str
    cause: str = ""


def end_of(run: SlurmJob, *, preempting: bool) -> _End:
    """The rule for a run's end: a run told to leave (preempted) that ends is requeued, whatever it
    exited with; a node failure requeues it; exit 0 completes; the time limit times out; a cancel
    from outside Fleetline cancels; every other end fails with its exit code."""
    if preempting:
        return _End(
            Job.State.PENDING, SchedulerEvent.Kind.EVICTED, "Evicted (preempted): checkpointed and left", "preempted"
        )
    if run.state in ("NODE_FAIL", "BOOT_FAIL"):
        return _End(Job.State.PENDING, SchedulerEvent.Kind.EVICTED, "Evicted (node failed): requeued", "node-failed")
    if run.state == "COMPLETED" and not run.exit_code:
        return _End(Job.State.COMPLETED, SchedulerEvent.Kind.COMPLETED, "Completed (exit code 0)")
    if run.state in ("TIMEOUT", "DEADLINE"):
        return _End(Job.State.TIMED_OUT, SchedulerEvent.Kind.TIMED_OUT, "Killed at its time limit")
    if run.state == "CANCELLED":
        return _End(Job.State.CANCELLED, SchedulerEvent.Kind.CANCELLED, "Cancelled on the cluster")
    code = run.exit_code if run.exit_code is not None else -1
    why = f"{run.state.lower()}: {run.reason}" if run.reason and run.reason != "None" else run.state.lower()
    return _End(Job.State.FAILED, SchedulerEvent.Kind.FAILED, f"Failed with exit code {code} ({why})")


class SlurmBackend:
    name = "slurm"
    real = True

    def __init__(
        self,
        client: SlurmClient,
        *,
        shared_dir: str,
        partition: str = "",
        accelerator: str = "H100",
        prefix: str = "fleetline-",
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.shared_dir = shared_dir
        self.partition = partition
        self.accelerator = accelerator
        self._clock = _Clock(0.0, 0.0)
        self._runs: dict[str, SlurmJob] = {}  # this tick's view of Fleetline's runs, by name
        self._to_release: list[int] = []

    @classmethod
    def from_settings(cls) -> SlurmBackend:
        client = SlurmClient(
            settings.FLEETLINE_SLURM_URL,
            jwt_key_path=settings.FLEETLINE_SLURM_JWT_KEY,
            admin_user=settings.FLEETLINE_SLURM_ADMIN_USER,
            timeout_s=settings.FLEETLINE_SLURM_TIMEOUT_S,
            slurm_conf=settings.FLEETLINE_SLURM_CONF or None,
        )
        return cls(
            client,
            shared_dir=settings.FLEETLINE_SLURM_SHARED_DIR,
            partition=settings.FLEETLINE_SLURM_PARTITION,
            accelerator=settings.FLEETLINE_SLURM_ACCELERATOR,
            prefix=settings.FLEETLINE_SLURM_RUN_PREFIX,
        )

    # 1. The fleet ---------------------------------------------------------------------------
    def fleet_sync(self, *, sim_now_s: float, wall_now: datetime) -> set[int]:
        self._clock = _Clock(sim_now_s, wall_now.timestamp())
        self._runs = {run.name: run for run in self.client.jobs() if run.name.startswith(self.prefix)}
        self._starts_record(sim_now_s)
        slow = self._slow_detect(sim_now_s)
        return slow | nodes_sync(
            nodes=self.client.nodes(),
            topology=self.client.topology(),
            accelerator=self.accelerator,
            sim_now_s=sim_now_s,
            client=self.client,
        )

    def _starts_record(self, sim_now_s: float) -> None:
        """A run's GPUs count from when its processes really started: until Slurm starts it (held
        until the deciding tick commits, then launched) its start moves with the clock, and once
        it runs its start is Slurm's. The ledger and the time limit then agree with Slurm's."""
        for job_id, attempt, started_s in (
            Job.objects.filter(state=Job.State.RUNNING).exclude(command="").values_list("id", "restarts", "started_s")
        ):
            run = self._runs.get(run_name(self.prefix, job_id, attempt))
            if run is None or (run.state == "PENDING" and run.start_unix is None) or run.held:
                real_s = sim_now_s
            elif run.start_unix is not None:
                real_s = self._clock.fleet(run.start_unix)
            else:
                continue
            if started_s is not None and real_s > started_s:
                Job.objects.filter(pk=job_id, state=Job.State.RUNNING, started_s=started_s).update(
                    started_s=real_s, anchor_s=real_s, version=F("version") + 1
                )

    def _slow_detect(self, sim_now_s: float) -> set[int]:
        """Slow nodes from the gangs' own progress (``progress_slow_nodes``): the node is
        cordoned (drained in Slurm), a slow incident opened, and its gangs told to checkpoint and
        leave within the preemption grace; the engine restarts them on other nodes."""
        row = fleet_policy_for_cycle()
        policy, grace_s = detector_policy(row), policy_from_row(row).preemption_grace_s
        changed: set[int] = set()
        names = dict(Node.objects.values_list("id", "name"))
        for job_id, gang in _gangs_running().items():
            started_s, node_ids = gang
            if len(node_ids) < 2 or started_s is None:
                continue
            # This run's ranks only: earlier runs' progress files stay in the job's folder.
            since_unix, held = self._clock.unix(started_s), {names[node_id] for node_id in node_ids}
            progress = {
                node: [point for point in points if point[0] >= since_unix]
                for node, points in progress_read(job_dir(self.shared_dir, self.prefix, job_id) / "progress").items()
                if node in held
            }
            progress = {node: points for node, points in progress.items() if points}
            for node_name, slowdown in progress_slow_nodes(
                progress, threshold=policy.slow_threshold, steps=policy.slow_consecutive_steps
            ).items():
                node = Node.objects.filter(name=node_name, state=Node.State.UP).first()
                if node is None:
                    continue
                changed.add(self._slow_node(node, slowdown, sim_now_s, grace_s, job_id))
        return changed

    def _slow_node(self, node: Node, slowdown: float, sim_now_s: float, grace_s: float, job_id: int) -> int:
        Node.objects.filter(pk=node.pk).update(state=Node.State.CORDONED)
        incident = Incident.objects.create(
            node=node, kind=Incident.Kind.SLOW, slowdown=slowdown, failed_at=sim_now_s, detected_at=sim_now_s
        )
        leaving = list(Job.objects.filter(allocations__node=node, state=Job.State.RUNNING).distinct())
        incident.jobs.set(leaving)
        for job in leaving:
            job_requeue_at(job, sim_now_s + grace_s, cause=incident_cause(incident), now_s=sim_now_s)
            run = self._runs.get(run_name(self.prefix, job.pk, job.restarts))
            if run is not None and run.state in LIVE_STATES:
                self._each(lambda slurm_id: self.client.signal(slurm_id, "USR1"), [run.job_id], "signal to checkpoint")
        logger.warning(
            "node %s is slow (%.1fx its gang's pace, job %d): cordoned, incident %d; %d gang(s) leave",
            node.name,
            slowdown,
            job_id,
            incident.pk,
            len(leaving),
        )
        return incident.pk

    # 2. What ended ------------------------------------------------------------------------------
    def runs_observe(self, *, loaded: Loaded) -> Observed:
        observed = Observed()
        state = loaded.state
        for job_id, row in loaded.jobs.items():
            if row.state != Job.State.RUNNING:
                continue
            run = self._runs.get(run_name(self.prefix, row.id, row.restarts))
            if run is None or run.state in LIVE_STATES:
                continue
            end = end_of(run, preempting=row.grace_until_s is not None)
            end_s = self._clock.fleet(run.end_unix) if run.end_unix else self._clock.sim_s
            end_s = min(max(end_s, row.started_s or end_s), self._clock.sim_s)
            view = state.run_view(job_id)
            gpus = sum(g for _, g in view.allocation) if view else row.gpus
            lost_gpu_s, failure = 0.0, False
            if end.state == Job.State.PENDING:
                lost_gpu_s = gpus * self._unsaved_s(row.id, row.started_s, end_s)
                # Before the eviction's event is written: a grace that ended is found by its request.
                failure = is_failure(eviction_causes(reasons={row.id: end.cause})[row.id].code)
            if not _run_end_write(row=row, end=end, end_s=end_s, exit_code=run.exit_code):
                continue
            state.withdraw(job_id, max(end_s, state.now))
            observed.finished.append(FinishedRun(job_id, max(end_s, loaded.sim_now_s), lost_gpu_s, failure))
            observed.changes.append(JobChange(row.id, row.team_id, end.state, end.event, end.message, end.cause))
        return observed

    def _unsaved_s(self, job_id: int, started_s: float | None, end_s: float) -> float:
        """Work a run loses when it stops at ``end_s``: since its last real checkpoint in this run,
        or since it started when it wrote none."""
        checkpoint = last_checkpoint_unix(job_dir(self.shared_dir, self.prefix, job_id))
        since = started_s if started_s is not None else end_s
        if checkpoint is not None:
            since = max(since, self._clock.fleet(checkpoint))
        return max(0.0, end_s - since)

    # 3. Carry the plan out ---------------------------------------------------------------------
    def plan_carry_out(self, *, applied: AppliedTick, sim_now_s: float, token: int) -> None:
        wanted = _runs_wanted(self.prefix)
        node_names = dict(Node.objects.values_list("id", "name"))
        stale = [run for name, run in self._runs.items() if run.state in LIVE_STATES and name not in wanted]
        submits: list[tuple[_Wanted, list[str]]] = []
        for name, want in wanted.items():
            nodes = [node_names[node_id] for node_id, _ in want.allocation]
            run = self._runs.get(name)
            if run is None:
                if not (want.backend_job_id and self._lost(want, name, sim_now_s)):
                    submits.append((want, nodes))
            elif run.state not in LIVE_STATES or not run.held:
                continue  # running, or ended: the next tick records how
            elif sorted(run.required_nodes) == sorted(nodes):
                self._to_release.append(run.job_id)  # held by a tick that committed, then died
            else:
                stale.append(run)  # held for other nodes by a tick that did not commit
                submits.append((want, nodes))
        self._each(self.client.cancel, [run.job_id for run in stale], "cancel")
        Job.objects.filter(backend_job_id__in=[str(run.job_id) for run in stale]).update(backend_job_id="")
        self._submit_all(submits, token=token, sim_now_s=sim_now_s)
        preempted = {c.job_id for c in applied.changes if c.event == SchedulerEvent.Kind.PREEMPTING}
        signalled = [
            run.job_id
            for name, want in wanted.items()
            if want.job_id in preempted and (run := self._runs.get(name)) is not None and run.state in LIVE_STATES
        ]
        self._each(lambda slurm_id: self.client.signal(slurm_id, "USR1"), signalled, "signal to checkpoint")

    def _each(self, call: Callable[[int], object], slurm_ids: list[int], what: str) -> None:
        """``call`` on each Slurm job, several at once; a failure is logged (the next tick's
        reconcile tries again)."""
        with ThreadPoolExecutor(max_workers=PARALLEL_CALLS) as pool:
            for slurm_id, error in zip(slurm_ids, pool.map(_outcome(call), slurm_ids), strict=True):
                if error is not None:
                    logger.error("could not %s Slurm job %d: %s", what, slurm_id, error)

    def _submit_all(self, submits: list[tuple[_Wanted, list[str]]], *, token: int, sim_now_s: float) -> None:
        """Submit the runs (held), several at once; record each Slurm id, or fail the job with
        Slurm's reason when Slurm refuses it (an account it does not know, a node it lacks). Each
        answer is written as it comes, so a long burst of starts keeps the tick's transaction busy
        rather than idle (PostgreSQL ends a transaction idle for ``FLEET_CYCLE_IDLE_TIMEOUT_S``)."""
        with ThreadPoolExecutor(max_workers=PARALLEL_CALLS) as pool:
            futures = {pool.submit(self._submit, want, nodes, token): (want, nodes) for want, nodes in submits}
            for future in as_completed(futures):
                self._submitted(*futures[future], future.result(), sim_now_s)

    def _submitted(self, want: _Wanted, nodes: list[str], outcome: int | SlurmError, sim_now_s: float) -> None:
        name = run_name(self.prefix, want.job_id, want.attempt)
        if isinstance(outcome, SlurmError):
            logger.error("Slurm refused %s: %s", name, outcome)
            row = Job.objects.filter(pk=want.job_id).values_list("id", "team_id", "state", "version", named=True)
            message = f"Failed: Slurm refused to run it ({outcome})"[:300]
            _run_end_write(
                row=row.get(), end=_End(Job.State.FAILED, SchedulerEvent.Kind.FAILED, message), end_s=sim_now_s
            )
            return
        Job.objects.filter(pk=want.job_id).update(backend_job_id=str(outcome))
        self._to_release.append(outcome)
        logger.info("submitted %s as Slurm job %d on %s (held until commit)", name, outcome, ",".join(nodes))

    def _lost(self, want: _Wanted, name: str, sim_now_s: float) -> bool:
        """A run submitted before that Slurm no longer lists (it forgets ended jobs after
        MinJobAge, when no leader ticked meanwhile): never submitted again, failed as lost."""
        known = self.client.job(int(want.backend_job_id))
        if known is not None and known.name != name:
            return False  # the id is an earlier attempt's
        row = Job.objects.filter(pk=want.job_id).values_list("id", "team_id", "state", "version", named=True).first()
        if row is not None:
            end = _End(Job.State.FAILED, SchedulerEvent.Kind.FAILED, "Failed: the cluster no longer knows its run")
            _run_end_write(row=row, end=end, end_s=sim_now_s, exit_code=None)
        logger.error("%s (Slurm job %s) is gone from the cluster: failed as lost", name, want.backend_job_id)
        return True

    def _submit(self, want: _Wanted, nodes: list[str], token: int) -> int | SlurmError:
        per_node = want.gpus // max(1, len(nodes))
        folder = job_dir(self.shared_dir, self.prefix, want.job_id)
        name = run_name(self.prefix, want.job_id, want.attempt)
        try:
            return self.client.submit(
                user=want.account,
                name=name,
                script=WRAPPER,
                nodelist=nodes,
                gpus_per_node=per_node,
                exclusive=want.whole_nodes,
                time_limit_min=None if want.time_limit_s is None else math.ceil(want.time_limit_s / 60.0) + 1,
                partition=self.partition or None,
                cwd=self.shared_dir,
                # Slurm opens it before the job makes its own folder: beside the folders, not in one.
                stdout=str(Path(self.shared_dir) / f"{name}.out"),
                comment=f"fleetline job {want.job_id} attempt {want.attempt} token {token}",
                env={
                    "FLEETLINE_JOB_ID": str(want.job_id),
                    "FLEETLINE_RESTART_COUNT": str(want.attempt),
                    "FLEETLINE_CHECKPOINT_DIR": str(folder / "checkpoint"),
                    "FLEETLINE_PROGRESS_DIR": str(folder / "progress"),
                    "FLEETLINE_COMMAND": want.command,
                },
                hold=True,
            )
        except SlurmError as error:
            return error

    def after_commit(self) -> None:
        releasing, self._to_release = self._to_release, []
        if not releasing:
            return
        # A run left held (a release that failed, a leader that died here) is released by the
        # next tick's reconcile.
        try:
            self.client.release_all(releasing)
        except SlurmError as error:
            logger.error("could not release every one of %d Slurm jobs: %s", len(releasing), error)


def _outcome(call: Callable[[int], object]) -> Callable[[int], SlurmError | None]:
    def outcome(slurm_id: int) -> SlurmError | None:
        try:
            call(slurm_id)
        except SlurmError as error:
            return error
        return None

    return outcome


def _gangs_running() -> dict[int, tuple[float | None, list[int]]]:
    """Running real jobs not already leaving (in a preemption grace): when their run started, and
    the nodes they hold."""
    gangs: dict[int, tuple[float | None, list[int]]] = {}
    for job_id, started_s, node_id in (
        Allocation.objects.filter(job__state=Job.State.RUNNING, job__grace_until_s__isnull=True)
        .exclude(job__command="")
        .values_list("job_id", "job__started_s", "node_id")
    ):
        gangs.setdefault(job_id, (started_s, []))[1].append(node_id)
    return gangs


def progress_read(folder: Path, *, tail_bytes: int = 4096) -> dict[str, list[tuple[float, float]]]:
    """Each rank's recent progress, by node: the ``UNIX_TIME STEP`` lines its job appended to
    ``$FLEETLINE_PROGRESS_FILE`` (``<node>.<rank>`` in the job's progress folder), oldest first."""
    by_node: dict[str, list[tuple[float, float]]] = {}
    try:
        files = list(folder.iterdir())
    except OSError:
        return by_node
    for path in files:
        node = path.name.rsplit(".", 1)[0]
        try:
            with path.open("rb") as handle:
                offset = max(0, path.stat().st_size - tail_bytes)
                handle.seek(offset)
                lines = handle.read().decode("utf-8", "replace").splitlines()
            lines = lines[1:] if offset else lines  # the first line read may be cut
        except OSError:
            continue
        points = []
        for line in lines:
            parts = line.split()
            try:
                points.append((float(parts[0]), float(parts[1])))
            except (IndexError, ValueError):
                continue
        if points and (node not in by_node or points[-1][0] > by_node[node][-1][0]):
            by_node[node] = points
    return by_node


def progress_slow_nodes(
    progress: dict[str, list[tuple[float, float]]], *, threshold: float, steps: int
) -> dict[str, float]:
    """The rule for a slow node on a real gang: each of its last ``steps`` steps took more than
    ``threshold`` times the gang's median step time (over every rank's last ``steps`` steps).
    Returns each slow node with how many times slower it goes. A rank that makes no progress at
    all is not slow: a dead node is Slurm's to report, and a gang that is leaving stops too."""
    durations = {
        node: [b[0] - a[0] for a, b in zip(points, points[1:], strict=False) if b[1] > a[1]][-steps:]
        for node, points in progress.items()
    }
    recent = [d for taken in durations.values() for d in taken]
    if len(durations) < 2 or len(recent) < steps:
        return {}
    median = statistics.median(recent)
    if median <= 0:
        return {}
    return {
        node: statistics.median(taken) / median
        for node, taken in durations.items()
        if len(taken) == steps and all(d > threshold * median for d in taken)
    }


@dataclass(frozen=True, slots=True)
class _Wanted:
    job_id: int
    attempt: int
    account: str
    command: str
    gpus: int
    time_limit_s: float | None
    allocation: tuple[tuple[int, int], ...]
    whole_nodes: bool
    backend_job_id: str


def _runs_wanted(prefix: str) -> dict[str, _Wanted]:
    """The runs the database says are running now, by run name."""
    allocations: dict[int, list[tuple[int, int]]] = defaultdict(list)
    node_gpus = dict(Node.objects.values_list("id", "gpus"))
    for job_id, node_id, gpus in Allocation.objects.filter(job__state=Job.State.RUNNING).values_list(
        "job_id", "node_id", "gpus"
    ):
        allocations[job_id].append((node_id, gpus))
    wanted = {}
    for row in Job.objects.filter(state=Job.State.RUNNING).values(
        "id", "restarts", "cluster_account", "command", "gpus", "time_limit_s", "backend_job_id"
    ):
        allocation = tuple(sorted(allocations.get(row["id"], ())))
        if not allocation or not row["command"]:
            continue
        wanted[run_name(prefix, row["id"], row["restarts"])] = _Wanted(
            job_id=row["id"],
            attempt=row["restarts"],
            account=row["cluster_account"],
            command=row["command"],
            gpus=sum(g for _, g in allocation),
            time_limit_s=row["time_limit_s"],
            allocation=allocation,
            whole_nodes=all(gpus == node_gpus.get(node_id) for node_id, gpus in allocation),
            backend_job_id=row["backend_job_id"],
        )
    return wanted


def _run_end_write(*, row: Any, end: _End, end_s: float, exit_code: int | None = None) -> bool:
    """Record a run's end under the guard of the version the tick read; free its GPUs."""
    with transaction.atomic():
        fields: dict[str, Any] = {"state": end.state, "grace_until_s": None, "exit_code": exit_code}
        added: dict[str, Any] = {}
        if end.state == Job.State.PENDING:
            fields.update(borrowing=False, placement_level="", backend_job_id="")
            added["restarts"] = F("restarts") + 1
        else:
            fields["finished_s"] = end_s
        if not Job.objects.filter(pk=row.id, state=row.state, version=row.version).update(
            **fields, **added, version=F("version") + 1
        ):
            return False
        allocations_release(row.id)
        SchedulerEvent.objects.create(
            job_id=row.id, team_id=row.team_id, kind=end.event, sim_time_s=end_s, message=end.message
        )
    return True


# The fleet --------------------------------------------------------------------------------------
def nodes_sync(
    *,
    nodes: list[SlurmNode],
    topology: dict[str, tuple[str, str]],
    accelerator: str,
    sim_now_s: float,
    client: SlurmClient | None = None,
) -> set[int]:
    """The node table made to match Slurm's nodes. Returns the incidents opened or closed."""
    existing = {node.name: node for node in Node.objects.select_related("rack")}
    # Read once a tick; a rack, pod or accelerator type is made only when a node first names it.
    racks = {rack.name: rack for rack in Rack.objects.all()}
    kinds = {kind.name: kind for kind in AcceleratorType.objects.all()}
    changed: set[int] = set()
    for slurm_node in nodes:
        rack_name, pod_name = topology.get(slurm_node.name, (DEFAULT_RACK, DEFAULT_POD))
        if rack_name not in racks:
            pod, _ = Pod.objects.get_or_create(name=pod_name)
            racks[rack_name], _ = Rack.objects.get_or_create(name=rack_name, defaults={"pod": pod})
        kind_name = (slurm_node.gres_type or accelerator).upper()
        if kind_name not in kinds:
            kinds[kind_name], _ = AcceleratorType.objects.get_or_create(name=kind_name)
        kind = kinds[kind_name]
        node = existing.pop(slurm_node.name, None)
        dead = bool(slurm_node.states & DEAD_STATES)
        if node is None:
            node = Node.objects.create(
                name=slurm_node.name,
                rack=racks[rack_name],
                accelerator_type=kind,
                gpus=slurm_node.gpus,
                healthy_gpus=0 if dead else slurm_node.gpus,
                state=Node.State.DOWN if dead else Node.State.UP,
            )
            logger.info("node %s joined from Slurm: %d GPUs in %s/%s", node.name, node.gpus, pod_name, rack_name)
        changed |= _node_follow(node, slurm_node, racks[rack_name], kind, sim_now_s, client)
    for gone in existing.values():
        if Allocation.objects.filter(node=gone).exists():
            if gone.state != Node.State.DOWN:
                changed |= _node_dead(gone, sim_now_s, why="left the cluster")
        else:
            gone.delete()
            logger.info("node %s left the cluster: removed", gone.name)
    return changed


def _node_follow(
    node: Node, slurm_node: SlurmNode, rack: Rack, kind: AcceleratorType, sim_now_s: float, client: SlurmClient | None
) -> set[int]:
    updates: dict[str, Any] = {}
    if node.rack_id != rack.pk:
        updates["rack"] = rack
    if node.accelerator_type_id != kind.pk:
        updates["accelerator_type"] = kind
    if node.gpus != slurm_node.gpus and node.allocated_gpus <= slurm_node.gpus:
        updates["gpus"] = slurm_node.gpus
    if updates:
        Node.objects.filter(pk=node.pk).update(**updates)
        for name, value in updates.items():
            setattr(node, name, value)
    if slurm_node.states & DEAD_STATES:
        return (
            set()
            if node.state == Node.State.DOWN
            else _node_dead(node, sim_now_s, why=" ".join(sorted(slurm_node.states)))
        )
    drained = bool(slurm_node.states & DRAIN_STATES)
    changed: set[int] = set()
    if node.state == Node.State.DOWN:
        changed = _node_back(node, sim_now_s)
        node.state = Node.State.CORDONED if drained and slurm_node.reason != DRAIN_REASON else Node.State.UP
        Node.objects.filter(pk=node.pk).update(state=node.state, healthy_gpus=node.gpus)
        if drained and slurm_node.reason == DRAIN_REASON and client is not None:
            client.resume(node.name)
        return changed
    if node.state == Node.State.CORDONED and not drained and client is not None:
        client.drain(node.name, DRAIN_REASON)
    elif node.state == Node.State.UP and drained:
        if slurm_node.reason == DRAIN_REASON and client is not None:
            client.resume(node.name)  # uncordoned in Fleetline
        else:
            Node.objects.filter(pk=node.pk).update(state=Node.State.CORDONED)
            logger.info("node %s drained in Slurm (%s): cordoned", node.name, slurm_node.reason)
    return changed


def _node_dead(node: Node, sim_now_s: float, *, why: str) -> set[int]:
    """The node is gone: down with no healthy GPU (the engine restarts its gangs elsewhere in
    this tick's plan), and a dead incident with the gangs it held."""
    Node.objects.filter(pk=node.pk).update(state=Node.State.DOWN, healthy_gpus=0)
    incident = Incident.objects.create(node=node, kind=Incident.Kind.DEAD, failed_at=sim_now_s, detected_at=sim_now_s)
    incident.jobs.set(Job.objects.filter(allocations__node=node, state=Job.State.RUNNING).distinct())
    logger.warning("node %s is dead (%s): incident %d", node.name, why, incident.pk)
    return {incident.pk}


def _node_back(node: Node, sim_now_s: float) -> set[int]:
    """A dead node answers again: its open incident is over."""
    open_ids = list(
        Incident.objects.filter(node=node, kind=Incident.Kind.DEAD, resumed_at__isnull=True).values_list(
            "pk", flat=True
        )
    )
    Incident.objects.filter(pk__in=open_ids, replaced_at__isnull=True).update(replaced_at=sim_now_s)
    Incident.objects.filter(pk__in=open_ids).update(restored_at=F("replaced_at"), resumed_at=F("replaced_at"))
    logger.info("node %s is back", node.name)
    return set(open_ids)
