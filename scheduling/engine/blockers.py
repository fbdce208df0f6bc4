"""The one thing that holds each pending job (`plan.Blocker`), told from what a cycle left
(`EndState`): which of its team's limits, how many GPUs short, the job ahead of it, the node, rack
or pod it waits for. One rule for both engines: the fast engine builds its end state from its
working index (`explain.end_state_of`), the reference from its own plain state.

A blocker explains, it never decides: it reads the state after the cycle and the reason the cycle
gave, and changes nothing a plan holds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from .model import Job
from .placement import nodes_needed
from .plan import (
    REASON_CAPACITY,
    REASON_GUARANTEE,
    REASON_POOL,
    REASON_PRIORITY,
    REASON_QUOTA,
    REASON_RESERVED_PREFIX,
    REASON_TOPOLOGY,
    Blocker,
)
from .vocabulary import (
    BLOCKER_BORROWING,
    BLOCKER_CAPACITY,
    BLOCKER_GUARANTEE,
    BLOCKER_POOL,
    BLOCKER_PRIORITY,
    BLOCKER_QUOTA_HELD,
    BLOCKER_RESERVED,
    BLOCKER_TEAM_LIMIT,
    BLOCKER_TEAM_SIZE,
    BLOCKER_TOPOLOGY,
    blocker_words,
)


class QuotaView(Protocol):
    """What blockers read of a cycle's quota ledger (the fast engine's `quota.QuotaLedger`, the
    reference's own plain ledger): the same questions, asked of either."""

    def used(self, team: str, accelerator: str) -> int: ...
    def guaranteed(self, team: str, accelerator: str) -> int: ...
    def limit(self, team: str, accelerator: str) -> float: ...
    def unguaranteed(self, accelerator: str) -> tuple[int, int]: ...
    def kept_for(self, team: str, accelerator: str) -> tuple[str, float] | None: ...
    def lendable_to(self, team: str, accelerator: str) -> int: ...
    def short_of_limit(self, team: str, accelerator: str, gpus: int) -> int: ...
    def short_of_pool(self, team: str, accelerator: str, gpus: int) -> int: ...
    def short_of_unguaranteed(self, team: str, accelerator: str, gpus: int) -> int: ...


@dataclass(frozen=True, slots=True)
class EndState:
    """What a cycle left, as far as its blockers read it: quotas as charged, free GPUs per node that
    placement may use (nodes held for a reservation have none) and those held, the topology, the
    reservations."""

    ledger: QuotaView
    free: Mapping[str, int]
    held: Mapping[str, int]
    node_accelerator: Mapping[str, str]
    node_rack: Mapping[str, str]
    node_pod: Mapping[str, str]
    gpus_per_node: int
    reserved: Mapping[str, tuple[str, ...]]  # job id -> the nodes reserved for it
    elastic: bool


def describe_blockers(waiting: Iterable[tuple[Job, str]], state: EndState) -> dict[str, Blocker]:
    """The `Blocker` of each waiting job, from its reason (`PendingStatus.reason`), in queue order:
    the job ahead of one is the first job waiting before it for the same accelerator (of higher
    priority, for a job held back by priority)."""
    free_of: dict[str, int] = {}
    for node_id, gpus in state.free.items():
        accelerator = state.node_accelerator[node_id]
        free_of[accelerator] = free_of.get(accelerator, 0) + gpus
    first: dict[str, Job] = {}
    highest: dict[str, Job] = {}
    closest = _Closest(state)
    # Most of a long queue waits alike for capacity: one blocker per distinct set of facts.
    alike: dict[tuple[str, int, int, str | None], Blocker] = {}
    blockers: dict[str, Blocker] = {}
    for job, reason in waiting:
        accelerator = job.accelerator
        size = job.min_gpus if state.elastic and job.min_gpus is not None and job.is_elastic else job.gpus
        if reason == REASON_CAPACITY:
            free = free_of.get(accelerator, 0)
            if job.id in state.reserved:  # (its own reserved nodes are its to count)
                free += sum(state.held.get(node, 0) for node in state.reserved[job.id])
            ahead = first.get(accelerator)
            ahead_id = None if ahead is None else ahead.id
            key = (accelerator, size, free, ahead_id)
            blocker = alike.get(key) or alike.setdefault(
                key, Blocker(BLOCKER_CAPACITY, accelerator, size, max(0, size - free), free, job_id=ahead_id)
            )
        elif reason in (REASON_QUOTA, REASON_GUARANTEE, REASON_POOL):
            blocker = _ledger_blocker(job, size, reason, state.ledger, free_of.get(accelerator, 0))
        elif reason == REASON_PRIORITY:
            ahead = highest.get(accelerator)
            if ahead is None or ahead.priority <= job.priority:
                ahead = first.get(accelerator)
            blocker = Blocker(BLOCKER_PRIORITY, accelerator, size, job_id=None if ahead is None else ahead.id)
        elif reason == REASON_TOPOLOGY:
            blocker = _topology_blocker(job, size, closest)
        else:
            blocker = _reserved_blocker(job, size, reason, state)
        blockers[job.id] = blocker
        if accelerator not in first:
            first[accelerator] = job
        top = highest.get(accelerator)
        if top is None or job.priority > top.priority:
            highest[accelerator] = job
    return blockers


def _reserved_blocker(job: Job, size: int, reason: str, state: EndState) -> Blocker:
    """The job whose reservation holds the GPUs this one would use, and where they are (a reason
    this module does not know says all there is: its code)."""
    if not reason.startswith(REASON_RESERVED_PREFIX):
        return Blocker(reason, job.accelerator, size)
    holder = reason.removeprefix(REASON_RESERVED_PREFIX)
    where, domain = _where(state, state.reserved.get(holder, ()))
    return Blocker(BLOCKER_RESERVED, job.accelerator, size, job_id=holder, level=where, domain=domain)


def _ledger_blocker(job: Job, size: int, reason: str, ledger: QuotaView, free: int) -> Blocker:
    """The blocker of a job the quota ledger refused (`reason`): a limit (`_quota_blocker`), the
    GPUs nobody is guaranteed (`_guarantee_blocker`), or the pool, whose `free` GPUs back other
    teams' loans of its team's guarantee."""
    if reason == REASON_QUOTA:
        return _quota_blocker(job, size, ledger)
    if reason == REASON_GUARANTEE:
        return _guarantee_blocker(job, size, ledger)
    return Blocker(BLOCKER_POOL, job.accelerator, size, have=free, team=job.team)


def _guarantee_blocker(job: Job, size: int, ledger: QuotaView) -> Blocker:
    """Work nobody may preempt, beyond its team's guarantee, runs only on the GPUs nobody is
    guaranteed: how many of those it lacks (the ledger's rule, `short_of_unguaranteed`)."""
    accelerator = job.accelerator
    unguaranteed, pinned = ledger.unguaranteed(accelerator)
    short = ledger.short_of_unguaranteed(job.team, accelerator, size)
    return Blocker(BLOCKER_GUARANTEE, accelerator, size, short, pinned, unguaranteed, team=job.team)


def _topology_blocker(job: Job, size: int, closest: _Closest) -> Blocker:
    """The domain a job waiting on topology needs, the closest one and how many GPUs it lacks."""
    state, accelerator = closest.state, job.accelerator
    if job.id in state.reserved:  # (its own reserved nodes are its to count)
        closest = _Closest(_with_own_reservation(state, job.id))
    level = _topology_level(job, size, closest)
    domain, have = closest.of(accelerator, level)
    if size > state.gpus_per_node:
        have *= state.gpus_per_node  # whole nodes, in GPUs
    return Blocker(BLOCKER_TOPOLOGY, accelerator, size, max(0, size - have), have, level=level, domain=domain)


def _quota_blocker(job: Job, size: int, ledger: QuotaView) -> Blocker:
    """Which of its team's limits holds a job refused for quota: the limit itself (at this size, or
    with what the team runs), the part of it kept for the team's job that waited longer, or, beyond
    its guarantee, the GPUs other teams lend."""
    team, accelerator = job.team, job.accelerator
    limit, used = ledger.limit(team, accelerator), ledger.used(team, accelerator)
    shown = None if limit == math.inf else int(limit)
    if size > limit:
        return Blocker(BLOCKER_TEAM_SIZE, accelerator, size, math.ceil(size - limit), used, shown, team)
    short = ledger.short_of_limit(team, accelerator, size)  # (the ledger's rules, asked, not restated)
    if short:
        return Blocker(BLOCKER_TEAM_LIMIT, accelerator, size, short, used, shown, team)
    kept = ledger.kept_for(team, accelerator)
    if kept is not None and kept[0] != job.id and used + size > kept[1]:
        holder, cap = kept
        short = math.ceil(used + size - cap)
        return Blocker(BLOCKER_QUOTA_HELD, accelerator, size, short, used, int(cap), team, holder)
    guaranteed, lent = ledger.guaranteed(team, accelerator), ledger.lendable_to(team, accelerator)
    short = ledger.short_of_pool(team, accelerator, size)
    return Blocker(BLOCKER_BORROWING, accelerator, size, short, lent, guaranteed, team)


def _with_own_reservation(state: EndState, job_id: str) -> EndState:
    """`state` with the GPUs held for `job_id`'s own reservation free again (itself without one)."""
    nodes = state.reserved.get(job_id)
    if not nodes:
        return state
    free = dict(state.free)
    for node_id in nodes:
        free[node_id] = free.get(node_id, 0) + state.held.get(node_id, 0)
    return replace(state, free=free)


def _topology_level(job: Job, size: int, closest: _Closest) -> str:
    """The domain a job waiting on topology needs its GPUs in: one node for a job that fits one,
    else its required level, else the fleet's whole nodes when too few are free, else a pod when no
    pod has enough of them, else a rack."""
    gpn = closest.state.gpus_per_node
    if size <= gpn:
        return "node"
    if job.required_level is not None:
        return job.required_level
    needed = nodes_needed(size, gpn)
    if closest.of(job.accelerator, "fleet")[1] < needed:
        return "fleet"
    return "pod" if closest.of(job.accelerator, "pod")[1] < needed else "rack"


class _Closest:
    """The node with the most free GPUs (level "node"), or the rack or pod with the most whole free
    nodes (the fleet: None), and how many, per accelerator and level: the first by id or name among
    equals. Found once per accelerator and level of a state."""

    def __init__(self, state: EndState) -> None:
        self.state = state
        self.found: dict[tuple[str, str], tuple[str | None, int]] = {}

    def of(self, accelerator: str, level: str) -> tuple[str | None, int]:
        key = (accelerator, level)
        if key not in self.found:
            self.found[key] = self._find(accelerator, level)
        return self.found[key]

    def _find(self, accelerator: str, level: str) -> tuple[str | None, int]:
        state = self.state
        gpn = state.gpus_per_node
        domain_of = {"rack": state.node_rack, "pod": state.node_pod}.get(level, {})
        counts: dict[str, int] = {}
        for node_id, gpus in state.free.items():
            if state.node_accelerator[node_id] != accelerator:
                continue
            if level == "node":
                counts[node_id] = gpus
            elif gpus >= gpn:
                domain = domain_of.get(node_id, "")
                counts[domain] = counts.get(domain, 0) + 1
        if not counts:
            return None, 0
        best = max(counts.values())
        return min(domain for domain, count in counts.items() if count == best) or None, best


def _where(state: EndState, node_ids: Sequence[str]) -> tuple[str | None, str | None]:
    """The smallest domain holding `node_ids`: (level, node id, rack key or pod)."""
    if not node_ids:
        return None, None
    if len(node_ids) == 1:
        return "node", node_ids[0]
    racks = {state.node_rack[node_id] for node_id in node_ids}
    if len(racks) == 1:
        return "rack", racks.pop()
    pods = {state.node_pod[node_id] for node_id in node_ids}
    return ("pod", pods.pop()) if len(pods) == 1 else ("fleet", None)


def blocker_text(blocker: Blocker, *, team: str, job: str, where: str) -> str:
    """A blocker in words, with its team's name, the job ahead and the domain as the reader names
    them (a page names them and links the job; see `vocabulary.BLOCKER_TEXTS`)."""
    words = blocker_words(blocker.kind, short=blocker.short, has_job=blocker.job_id is not None, level=blocker.level)
    return words.format(
        team=team,
        job=job,
        where=where,
        accelerator=blocker.accelerator,
        gpus=blocker.gpus,
        short=blocker.short,
        have=blocker.have,
        limit="no" if blocker.limit is None else blocker.limit,
        level=blocker.level or "fleet",
    )
