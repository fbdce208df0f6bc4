"""Telling a dead node from a slow one, from heartbeats and step times alone.

- **Dead**: no heartbeat for ``dead_after_missed`` intervals (``now - last >= k x interval``).
- **Slow**: heartbeats arrive, but for ``slow_consecutive_steps`` steps in a row the node's step
  time exceeded ``slow_threshold`` x the median step time of the rest of its gang. The node itself
  is left out of the median so a two-node gang can still point at its straggler; a one-node gang
  has nobody to compare with and is never called slow.

- **A lost GPU**: the node keeps heartbeating and its first heartbeat after the loss carries the
  GPU error (an XID), so the loss is known then, not at once nor after a timeout.

Dead wins: a node that stopped heartbeating is dead whatever its last step times said. A crash
stalls the whole gang (every step waits on an all-reduce), so no survivor looks slow.

``measure_detector`` replays crafted streams with lost heartbeats and step-time jitter and reports
the time to detect each kind and the false-positive rate, for the simulator and the benchmark.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .failures import Rng

OK, DEAD, SLOW = "ok", "dead", "slow"


@dataclass(frozen=True, slots=True)
class DetectorPolicy:
    heartbeat_interval_s: float = 10.0
    dead_after_missed: int = 3
    slow_threshold: float = 1.3
    slow_consecutive_steps: int = 5
    # A slow node's gang migrates at its next checkpoint, unless the slowdown is at least this.
    severe_slowdown: float = 2.0

    @property
    def dead_after_s(self) -> float:
        return self.heartbeat_interval_s * self.dead_after_missed


def is_dead(last_heartbeat_s: float | None, now_s: float, policy: DetectorPolicy) -> bool:
    """No heartbeat for k intervals. A node never heard from has nothing to miss yet."""
    if last_heartbeat_s is None:
        return False
    return now_s - last_heartbeat_s >= policy.dead_after_s - 1e-9


def dead_detected_at(failed_s: float, phase_s: float, policy: DetectorPolicy) -> float:
    """When a node that heartbeats at ``phase_s + n x interval`` and stops at ``failed_s`` is called
    dead: k intervals after its last heartbeat at or before the failure."""
    interval = policy.heartbeat_interval_s
    last = phase_s + math.floor((failed_s - phase_s) / interval + 1e-9) * interval
    return last + policy.dead_after_s


def gpu_loss_detected_at(failed_s: float, phase_s: float, policy: DetectorPolicy) -> float:
    """When a GPU lost at ``failed_s`` on a node that heartbeats at ``phase_s + n x interval`` is
    found: at the node's first heartbeat at or after the loss, which carries the GPU error."""
    interval = policy.heartbeat_interval_s
    return phase_s + math.ceil((failed_s - phase_s) / interval - 1e-9) * interval


def slow_nodes(step_times_s: Mapping[str, Sequence[float]], policy: DetectorPolicy) -> dict[str, float]:
    """Nodes of one gang whose last m steps were all above threshold x the others' median, with the
    mean ratio over those steps. Streams are aligned at their ends (index -1 = latest step)."""
    m = policy.slow_consecutive_steps
    if len(step_times_s) < 2 or any(len(times) < m for times in step_times_s.values()):
        return {}
    slow: dict[str, float] = {}
    for node_id, times in step_times_s.items():
        ratios = []
        for back in range(1, m + 1):
            others = statistics.median(t[-back] for other, t in step_times_s.items() if other != node_id)
            ratio = times[-back] / others if others > 0 else math.inf
            if ratio <= policy.slow_threshold:
                break
            ratios.append(ratio)
        else:
            slow[node_id] = sum(ratios) / len(ratios)
    return slow


def classify(
    *,
    now_s: float,
    last_heartbeat_s: Mapping[str, float | None],
    gangs: Sequence[Mapping[str, Sequence[float]]],
    policy: DetectorPolicy,
) -> dict[str, str]:
    """``ok``, ``dead`` or ``slow`` for every node with a heartbeat record; dead wins over slow."""
    verdicts = {node_id: (DEAD if is_dead(last, now_s, policy) else OK) for node_id, last in last_heartbeat_s.items()}
    for gang in gangs:
        for node_id in slow_nodes(gang, policy):
            if verdicts.get(node_id, OK) == OK:
                verdicts[node_id] = SLOW
    return verdicts


def slow_detected_after_s(step_s: float, slowdown: float, policy: DetectorPolicy) -> float:
    """Time from the slowdown until the m-th slow step ends (the gang steps at the slow pace)."""
    return policy.slow_consecutive_steps * step_s * slowdown


@dataclass(frozen=True, slots=True)
class DetectorStats:
    dead_ttd_mean_s: float | None
    slow_ttd_mean_s: float | None
    dead_missed: int
    slow_missed: int
    misclassified: int  # a dead node called slow or a slow node called dead
    false_positives: int  # healthy nodes flagged
    healthy_node_h: float

    @property
    def false_positives_per_node_day(self) -> float:
        return self.false_positives / self.healthy_node_h * 24.0 if self.healthy_node_h > 0 else 0.0

    def as_dict(self) -> dict[str, float | int | None]:
        return {
            "dead_ttd_mean_s": self.dead_ttd_mean_s,
            "slow_ttd_mean_s": self.slow_ttd_mean_s,
            "dead_missed": self.dead_missed,
            "slow_missed": self.slow_missed,
            "misclassified": self.misclassified,
            "false_positives": self.false_positives,
            "false_positives_per_node_day": self.false_positives_per_node_day,
        }


@dataclass(frozen=True)
class Streams:
    """The crafted streams `measure_detector` replays: `gangs` gangs of `gang_nodes` nodes over
    `horizon_s`, steps of `step_s` with log-normal jitter `step_jitter`, heartbeats lost with
    probability `heartbeat_loss`, a slow node slowed by a factor drawn from `slowdown_range`."""

    gangs: int = 40
    gang_nodes: int = 8
    horizon_s: float = 3600.0
    step_s: float = 10.0
    step_jitter: float = 0.1
    heartbeat_loss: float = 0.02
    slowdown_range: tuple[float, float] = (1.2, 3.0)


def measure_detector(rng: Rng, policy: DetectorPolicy, streams: Streams = Streams()) -> DetectorStats:
    """Crafted streams (`Streams`): in each gang one node crashes (even gangs) or turns slow (odd
    gangs) at a random time; heartbeats are lost with probability ``heartbeat_loss``; step times
    carry log-normal jitter of ``step_jitter``. The detector looks once per heartbeat interval."""
    tally = _Tally()
    for g in range(streams.gangs):
        tally.add(_replay_gang(rng, policy, streams, g), streams.horizon_s)
    return tally.stats()


@dataclass
class _Gang:
    """One gang's replay: its nodes, the failing one, how and when it failed, and what the
    detector flagged (verdict and when, per node)."""

    nodes: list[str]
    victim: str
    crash: bool
    fail_s: float
    flagged: dict[str, tuple[str, float]]


def _replay_gang(rng: Rng, policy: DetectorPolicy, streams: Streams, g: int) -> _Gang:
    horizon_s, interval_s = streams.horizon_s, policy.heartbeat_interval_s
    nodes = [f"g{g}n{i}" for i in range(streams.gang_nodes)]
    victim, crash = nodes[rng.randrange(streams.gang_nodes)], g % 2 == 0
    fail_s = rng.uniform(0.2, 0.8) * horizon_s
    slowdown = rng.uniform(*streams.slowdown_range)
    phase = {node: rng.uniform(0, interval_s) for node in nodes}
    steps: dict[str, list[float]] = {node: [] for node in nodes}
    gang_clock = 0.0
    flagged: dict[str, tuple[str, float]] = {}
    heard: dict[str, float | None] = {node: None for node in nodes}
    beat_index = {node: 0 for node in nodes}
    check = interval_s
    while check <= horizon_s:
        while gang_clock < check and not (crash and gang_clock >= fail_s):
            times = {n: streams.step_s * math.exp(rng.gauss(0.0, streams.step_jitter)) for n in nodes}
            if not crash and gang_clock >= fail_s:
                times[victim] *= slowdown
            for n in nodes:
                steps[n].append(times[n])
            gang_clock += max(times.values())
        for n in nodes:
            while phase[n] + beat_index[n] * interval_s <= check:
                sent = phase[n] + beat_index[n] * interval_s
                beat_index[n] += 1
                if (crash and n == victim and sent > fail_s) or rng.random() < streams.heartbeat_loss:
                    continue
                heard[n] = sent
        window = {n: s[-policy.slow_consecutive_steps :] for n, s in steps.items()}
        for n, verdict in classify(now_s=check, last_heartbeat_s=heard, gangs=[window], policy=policy).items():
            if verdict != OK and n not in flagged:
                flagged[n] = (verdict, check)
        check += interval_s
    return _Gang(nodes, victim, crash, fail_s, flagged)


@dataclass
class _Tally:
    """What the replays of the gangs add up to (`DetectorStats`)."""

    dead_ttd: list[float] = field(default_factory=list)
    slow_ttd: list[float] = field(default_factory=list)
    dead_missed: int = 0
    slow_missed: int = 0
    misclassified: int = 0
    false_positives: int = 0
    healthy_s: float = 0.0

    def add(self, gang: _Gang, horizon_s: float) -> None:
        for n in gang.nodes:
            verdict, at = gang.flagged.get(n, (OK, horizon_s))
            if n != gang.victim:
                self.healthy_s += horizon_s
                self.false_positives += verdict != OK
                continue
            expected = DEAD if gang.crash else SLOW
            if verdict == OK:
                self.dead_missed += gang.crash
                self.slow_missed += not gang.crash
            elif verdict != expected or at < gang.fail_s:
                self.misclassified += 1
            else:
                (self.dead_ttd if gang.crash else self.slow_ttd).append(at - gang.fail_s)

    def stats(self) -> DetectorStats:
        return DetectorStats(
            sum(self.dead_ttd) / len(self.dead_ttd) if self.dead_ttd else None,
            sum(self.slow_ttd) / len(self.slow_ttd) if self.slow_ttd else None,
            self.dead_missed,
            self.slow_missed,
            self.misclassified,
            self.false_positives,
            self.healthy_s / 3600.0,
        )
