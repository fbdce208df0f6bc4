"""What one tick did, as the live cycle (`scheduling.cycle`) hands it to its readers after commit
(`scheduling.live`: the feed, the job notices): the job changes the plan's writes made and the
runs that ended (`AppliedTick`), and the fleet as the usage ledger sampled it (`TickSample`).

The cycle builds these and the readers take them; neither imports the other's modules for them
(`tests/test_import_boundary.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core.fleet_share import SharePoint


@dataclass(frozen=True, slots=True)
class JobChange:
    job_id: int
    team_id: int
    state: str
    event: str
    message: str
    # Why an evicted job left its GPUs (`scheduling.cycle.causes`: "preempted-by:…", "node-failed", …).
    cause: str = ""
    # The eviction's message, when the job was evicted and started again in the same tick.
    evicted: str = ""


@dataclass(frozen=True, slots=True)
class FinishedRun:
    """A run that ended inside this tick, for the usage ledger."""

    job_id: str
    end_s: float
    lost_gpu_s: float
    # Whether hardware ended it (`scheduling.cycle.causes.is_failure` of its eviction's cause):
    # the ledger books its rolled-back work as lost to failures, else to evictions.
    failure: bool = False


@dataclass
class AppliedTick:
    changes: list[JobChange] = field(default_factory=list)
    finished: list[FinishedRun] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)

    def count(self, event: str) -> int:
        return sum(1 for change in self.changes if change.event == event)


@dataclass(frozen=True, slots=True)
class TickSample:
    sim_time_s: float
    capacity_gpus: int
    healthy_gpus: int
    serving_gpus: int
    training_gpus: int
    batch_gpus: int
    pending_jobs: int
    running_jobs: int
    node_used: dict[str, int]

    @property
    def allocated_gpus(self) -> int:
        return self.serving_gpus + self.training_gpus + self.batch_gpus

    @property
    def share(self) -> SharePoint:
        return SharePoint(
            self.sim_time_s,
            self.serving_gpus,
            self.training_gpus,
            self.batch_gpus,
            self.healthy_gpus,
            self.pending_jobs,
            self.capacity_gpus,
        )
