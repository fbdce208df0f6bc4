"""What a failed node means for the gangs on it, what they lose, and when they leave.

The decisions the simulator's failure hook (`scheduling.sim.failures`) and the live failures step
(`scheduling.cycle.failures`) both take, as pure functions over a `Gang`, the one view of a
running gang both can build (from a `RunRecord`, or from a job's row and its placement):

- a crash or a lost GPU stalls the whole gang at once (every step waits on the dead member) until
  the node is found out: a crash when the detector calls the node dead (k missed heartbeats), a
  lost GPU at the node's first heartbeat after the loss, which carries the GPU error
  (`detector.gpu_loss_detected_at`). Then the gang goes back to its last checkpoint as of the
  failure and restarts elsewhere. It loses the stall on every GPU it holds, the work since that
  checkpoint, and the restore before it computes again;
- a slow node slows its gangs by the slowdown from the failure on (`Gang.slowed`); the detector
  flags it after m slow steps, never when the slowdown is within the noise and never on a node
  running nothing (no steps to compare). A flagged node is cordoned and its gangs leave at their
  next checkpoint, or at once when the slowdown is severe (or they cannot wait for one); a gang
  that finishes first stays to its end (`slow_gang_exit`). The slow stretch costs
  (1 - 1 / slowdown) of the gang's GPU time since the node turned slow, until it leaves or ends;
  a slowdown nobody notices lasts until the node is repaired (`slow_stretch_gpu_s`), which closes
  its incident.

What a slowdown costs is known when its outcome is decided (at the failure when nobody will notice
it, at the detection otherwise), and both sides count it then; a stall and a rollback are counted
at the detection, a restore when the gang computes again.

Progress, checkpoints and restore times come from `progress`, as everywhere else.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .detector import DetectorPolicy, slow_detected_after_s
from .failures import CRASH, GPU_LOSS, Failure
from .progress import checkpoint_at, next_checkpoint_progress, progress_at, time_at_progress, work_gpu_s

# A gang on a dead node makes no progress at all.
STALLED = math.inf


@dataclass(frozen=True, slots=True)
class Gang:
    """A running gang as recovery sees it: the GPUs it holds, the size its work is counted in,
    its work (`anchor_progress_s` at `anchor_s`, growing at `rate`), the progress it restarted
    from and how often it checkpoints."""

    job_id: str
    gpus: int
    size_gpus: int
    duration_s: float
    checkpoint_interval_s: float | None
    anchor_s: float
    anchor_progress_s: float
    base_progress_s: float
    rate: float

    def progress_at(self, time_s: float) -> float:
        return progress_at(self.anchor_s, self.anchor_progress_s, self.rate, self.duration_s, time_s)

    def checkpoint_at(self, time_s: float) -> float:
        return checkpoint_at(self.base_progress_s, self.progress_at(time_s), self.checkpoint_interval_s)

    def slowed(self, since_s: float, slowdown: float) -> Gang:
        """The gang from `since_s` on, on a node `slowdown` x slower (`STALLED`: standing still):
        re-anchored there (not when its anchor is later: it is still restoring) at its rate over
        the slowdown, as `FleetState.throttle_node` re-anchors a run."""
        anchor_s = max(self.anchor_s, since_s)
        return replace(
            self, anchor_s=anchor_s, anchor_progress_s=self.progress_at(anchor_s), rate=self.rate / max(1.0, slowdown)
        )

    def ends_at(self) -> float:
        """When its work is done at its rate (never when it makes no progress)."""
        if self.rate <= 0:
            return math.inf
        return time_at_progress(self.anchor_s, self.anchor_progress_s, self.rate, self.duration_s)


def node_slowdown(failure: Failure) -> float:
    """How much slower the gangs on the failed node progress from the failure on."""
    return STALLED if failure.kind in (CRASH, GPU_LOSS) else failure.slowdown


def slow_detected_at(
    failed_s: float, slowdown: float, step_s: float, detector: DetectorPolicy, *, gangs: int
) -> float | None:
    """When the detector flags a node that turned `slowdown` x slower at `failed_s` while running
    `gangs` gangs: after m steps at the slow pace; never when the slowdown is within the noise
    (`slow_threshold`), nor on a node running nothing (no steps to compare)."""
    if slowdown <= detector.slow_threshold or gangs <= 0:
        return None
    return failed_s + slow_detected_after_s(step_s, slowdown, detector)


def leaves_at_once(gang: Gang, slowdown: float, detector: DetectorPolicy) -> bool:
    """A gang on a node found slow leaves it at once when the slowdown is severe, or when it
    cannot reach a checkpoint (none, or no progress)."""
    return slowdown >= detector.severe_slowdown or not gang.checkpoint_interval_s or gang.rate <= 0


def slow_gang_leaves_at(gang: Gang, now_s: float, slowdown: float, detector: DetectorPolicy) -> float | None:
    """When a gang on a node found slow at `now_s` leaves it: at once (`leaves_at_once`), else at
    its next checkpoint, so it loses no work; None when it finishes before that checkpoint (it
    stays to the end)."""
    if leaves_at_once(gang, slowdown, detector):
        return now_s
    next_progress = next_checkpoint_progress(gang.checkpoint_at(now_s), gang.checkpoint_interval_s, gang.duration_s)
    if next_progress is None:
        return None
    return max(now_s, time_at_progress(gang.anchor_s, gang.anchor_progress_s, gang.rate, next_progress))


@dataclass(frozen=True, slots=True)
class SlowExit:
    """How a gang leaves a node found slow (`leaves_s`; None: it stays to its end) and what the
    slowdown costs it in all."""

    leaves_s: float | None
    lost_gpu_s: float


def slow_gang_exit(
    gang: Gang, failed_s: float, detected_s: float, slowdown: float, detector: DetectorPolicy
) -> SlowExit:
    """What a gang on a node that turned slow at `failed_s` and was found slow at `detected_s` does,
    and loses (`gang` at its slowed pace, `Gang.slowed`): it leaves (`slow_gang_leaves_at`) and
    loses the slow stretch until then and its work since its last checkpoint (none when it waited
    for one); or it finishes first and loses the slow stretch until its end."""
    leaves_s = slow_gang_leaves_at(gang, detected_s, slowdown, detector)
    if leaves_s is None:
        return SlowExit(None, slow_stretch_gpu_s(gang, failed_s, math.inf, slowdown))
    stretch = slowed_gpu_s(failed_s, leaves_s, gang.gpus, slowdown)
    return SlowExit(leaves_s, stretch + rolled_back_gpu_s(gang, leaves_s))


def slow_stretch_gpu_s(gang: Gang, failed_s: float, until_s: float, slowdown: float) -> float:
    """GPU time a gang that stays on a node slow from `failed_s` loses by `until_s` (the node's
    repair; `math.inf`: never), or by its end when that comes first (`gang` at its slowed pace)."""
    return slowed_gpu_s(failed_s, max(failed_s, min(until_s, gang.ends_at())), gang.gpus, slowdown)


def stall_gpu_s(failed_s: float, detected_s: float, gpus: int) -> float:
    """GPU time a gang held on a dead node between the failure and its detection."""
    return (detected_s - failed_s) * gpus


def slowed_gpu_s(slow_since_s: float, until_s: float, gpus: int, slowdown: float) -> float:
    """GPU time a slowdown wasted: (1 - 1 / slowdown) of the gang's GPU time at the slow pace."""
    return (until_s - slow_since_s) * gpus * (1.0 - 1.0 / slowdown)


def restore_gpu_s(restarted_s: float, resumed_s: float, gpus: int) -> float:
    """GPU time a restart held before its gang computed again (reading its checkpoint back)."""
    return (resumed_s - restarted_s) * gpus


def rolled_back_gpu_s(gang: Gang, failed_s: float) -> float:
    """The work since its last checkpoint that a gang stopped by a failure at `failed_s` loses."""
    progress = gang.progress_at(failed_s)
    kept = checkpoint_at(gang.base_progress_s, progress, gang.checkpoint_interval_s)
    return work_gpu_s(progress, kept, gang.size_gpus)


def lost_by_detection_gpu_s(gang: Gang, failed_s: float, detected_s: float) -> float:
    """What a gang has lost when the failure of its node (at `failed_s`) is detected and it goes
    back to its checkpoint: the stall on every GPU it holds, and its work since that checkpoint."""
    return stall_gpu_s(failed_s, detected_s, gang.gpus) + rolled_back_gpu_s(gang, failed_s)
