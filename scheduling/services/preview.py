"""When a job would start if it were submitted now: the engine's own answer on the current
snapshot, with the job added to the queue. Nothing is written; the live cycle is not involved."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from scheduling import engine
from scheduling.cycle.snapshot import snapshot_build
from scheduling.live.explanations import wait_names_for
from scheduling.live.waits import JobWait
from scheduling.models import AcceleratorType
from scheduling.services.jobs import JobSpec, fleet_now_s, job_spec_errors
from tenants.models import PriorityClass, Team

# Real job ids are numbers: this one cannot collide with a queued job.
PREVIEW_JOB_ID = "preview"


@dataclass(frozen=True, slots=True)
class StartPreview:
    now_s: float
    starts_now: bool = False
    reason: str | None = None
    estimated_start_s: float | None = None
    waits_for: str | None = None
    errors: dict[str, str] = field(default_factory=dict)
    # The wait it would have, with the one thing that would hold it, as a job's page shows it.
    wait: JobWait | None = None

    @property
    def never_runs(self) -> bool:
        """Whether what is refused is the size asked for on its accelerator: no healthy fleet of
        today's shape (or the team's quota ceiling) could ever run it, whenever it were submitted.
        The form itself bounds the gang size, so these fields' errors are the submission's."""
        return bool(self.errors.keys() & {"gpus", "accelerator_type"})


def job_start_preview(*, team: Team, spec: JobSpec) -> StartPreview:
    """Schedule the fleet as it is now with ``spec`` queued for ``team``: whether the job would
    start at the next cycle, and otherwise the reason and estimated start the engine gives it
    (or what it would wait for). A spec the submission would refuse gets its errors instead.
    The snapshot's fixed number of queries plus three; one engine cycle of CPU."""
    now_s = fleet_now_s()
    errors = job_spec_errors(team=team, spec=spec)
    if errors:
        return StartPreview(now_s=now_s, errors=errors)
    priority = PriorityClass.objects.get(pk=spec.priority_class_id)
    accelerator = AcceleratorType.objects.values_list("name", flat=True).get(pk=spec.accelerator_type_id)
    job = engine.Job(
        id=PREVIEW_JOB_ID,
        team=str(team.pk),
        kind=spec.kind,
        priority=priority.value,
        preemptible=priority.preemptible,
        may_preempt=priority.may_preempt,
        accelerator=accelerator,
        gpus=spec.gpus,
        duration_s=spec.duration_s,
        submit_s=now_s,
        time_limit_s=spec.time_limit_s,
        min_gpus=spec.min_gpus,
        max_gpus=spec.max_gpus,
        checkpoint_interval_s=spec.checkpoint_interval_s,
        checkpoint_gb=spec.checkpoint_gb,
        checkpoint_on_preempt=spec.checkpoint_on_preempt,
        required_level=spec.required_level or None,
        preferred_level=spec.preferred_level or None,
    )
    loaded = snapshot_build(sim_now_s=now_s)
    snapshot = loaded.state.snapshot(now_s, loaded.teams, loaded.quotas, loaded.policy, loaded.usage)
    # The state's kept book still holds for the running jobs; its kept queue, taken without the
    # previewed job, is passed over (`kept.Kept`).
    plan = engine.schedule(
        replace(snapshot, pending=(*snapshot.pending, job)), now_s, explain={PREVIEW_JOB_ID}, kept=loaded.state.kept()
    )
    if any(start.job_id == PREVIEW_JOB_ID for start in plan.starts()):
        return StartPreview(now_s=now_s, starts_now=True, estimated_start_s=now_s)
    status = plan.status_of(PREVIEW_JOB_ID)
    if status is None:  # not started and not explained: the engine had nothing to say
        return StartPreview(now_s=now_s)
    blockers = plan.blockers((*snapshot.pending, job))
    blocker = blockers.get(PREVIEW_JOB_ID)
    mine = {PREVIEW_JOB_ID: blocker} if blocker is not None else {}
    names = wait_names_for(statuses=[status], blockers=mine)
    return StartPreview(
        now_s=now_s,
        reason=status.reason,
        estimated_start_s=status.estimated_start_s,
        waits_for=status.waits_for,
        wait=JobWait(status.reason, status.estimated_start_s, status.waits_for, blocker, names),
    )
