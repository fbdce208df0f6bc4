"""Queue order: priority class, then the gangs requeued by a node failure, then fair share with age,
then the within-team policy, then job id."""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Iterable, Mapping
from itertools import chain, compress, count, islice, repeat
from operator import add, attrgetter, eq, mul, ne, not_
from typing import Any, TypeVar

from .model import Job, Policy

T = TypeVar("T")


def order_jobs(
    jobs: Iterable[Job],
    policy: Policy,
    priorities: Mapping[str, float],
    now: float,
    kept: QueueView | None = None,
) -> list[Job]:
    """Pending jobs in the order the cycle considers them.

    Higher priority class first. With `queue_order` "shortest_limit": then the jobs that waited
    `max_age_s` or longer (so that no job starves behind shorter ones), then the shortest time
    limit whatever the team, submit time and job id. With "fair_share": then, when fair share is
    on, the higher score: the team's fair-share priority (`fairshare.fairshare_priorities`, 1.0 for
    a team that used nothing) plus, as in Slurm's multifactor priority, `age_weight` x the job's
    wait over `max_age_s` (capped at 1), so that a heavy team's jobs are not starved for ever; then
    the within-team order (submit time, shortest time limit, or least attained service), with
    submit time and finally the job id as explicit tie-breakers. With an age weight, the within-team
    order only ranks jobs of equal score (jobs of one team that have all waited `max_age_s`).
    Without one (`age_weight` 0), a team's jobs share its score and the within-team order ranks
    them all, after the jobs that waited `max_age_s` (so that none starves behind shorter ones).

    Whatever the order, the jobs a node failure requeued (`Job.requeued_by_failure`) go first
    within their class, in that order among themselves (`failed_first`): work a failure
    interrupted gets its place back before new work takes it, and nothing else moves.

    Class and score make one number per job, sorted by `sort_by_numbers`; without an age term, by
    `_sort_by_team_score`, or, given the queue `kept` in within-team order by whoever queued the
    jobs (`KeptQueue`, `FleetState`), from it (fast path; plain: sorting `jobs`).
    """
    if kept is not None:
        ordered = kept.order(jobs, policy, priorities, now)
        if ordered is not None:
            return failed_first(ordered) if kept.queue.failed else ordered
    queue = list(jobs)
    if _aged_first(policy):
        _sort_by_team_score(queue, policy, priorities, now)
    else:
        sort_by_numbers(queue, _numbers(queue, policy, priorities, now), _tiebreak(policy), reverse=True)
    return failed_first(queue) if True in map(_FAILED, queue) else queue


def failed_first(queue: list[Job]) -> list[Job]:
    """`queue` (in class order, highest first) with the jobs requeued by a node failure moved ahead
    of the others of their class, each part in queue order (a stable sort: nothing else moves)."""
    queue.sort(key=_class_then_failed)
    return queue


def _class_then_failed(job: Job) -> tuple[int, bool]:
    return (-job.priority, not job.requeued_by_failure)


_SUBMIT, _PRIORITY, _TEAM = attrgetter("submit_s"), attrgetter("priority"), attrgetter("team")
_FAILED = attrgetter("requeued_by_failure")


def sort_by_number(
    items: list[T], number: Callable[[T], float], tiebreak: Callable[[T], Any], *, reverse: bool = False
) -> list[float]:
    """`sort_by_numbers` with the number of each item given by `number`."""
    return sort_by_numbers(items, list(map(number, items)), tiebreak, reverse=reverse)


def sort_by_numbers(
    items: list[T], numbers: list[float], tiebreak: Callable[[T], Any], *, reverse: bool = False
) -> list[float]:
    """Sort `items` in place by their `numbers` (one per item, in order), then (ascending) by
    `tiebreak` among equal numbers, and return the number of each position.

    The caller computes the numbers as the items come: in the order they lie in memory, for
    objects built in a row. On a long list, reading every item in any other order costs a cache
    miss each, which made sorting key by key (stable sorts from the last key to the first) the
    slowest part of ordering a long queue; and comparing numbers is much cheaper than comparing
    tuples. Only runs of equal numbers are sorted again, by `tiebreak`.
    """
    if numbers and numbers.count(numbers[0]) == len(numbers):
        # Fast path: one number for all (one priority class, no fair share): sorting by it keeps
        # the order, and the one run of equal numbers is sorted by `tiebreak` (plain: the lines below).
        items.sort(key=tiebreak)
        return numbers
    # The positions sorted by their numbers, keyed by a C-level lookup (a Python key function per
    # item cost more than the sort); stable, even reversed: equal numbers keep their order.
    order = sorted(range(len(items)), key=numbers.__getitem__, reverse=reverse)
    items[:] = map(items.__getitem__, order)
    numbers = list(map(numbers.__getitem__, order))  # now the number of each position
    # The positions whose number equals the next one's, and the runs of equal numbers they make up
    # (a tied position not right after another begins one), found in C-level passes (at overload
    # most of a queue ties): only those runs are sorted again.
    tied = list(compress(count(), map(eq, numbers, islice(numbers, 1, None))))
    begins = list(map(ne, tied, map(add, chain((-2,), tied), repeat(1))))
    lasts = compress(tied, chain(islice(begins, 1, None), (True,)))
    for first, last in zip(compress(tied, begins), lasts, strict=True):
        items[first : last + 2] = sorted(items[first : last + 2], key=tiebreak)
    return numbers


def _sort_by_team_score(queue: list[Job], policy: Policy, priorities: Mapping[str, float], now: float) -> None:
    """Sort `queue` in place by score (without an age term: one per team and class), highest
    first, then the jobs that waited `max_age_s` before the others, then the within-team order.

    Fast path: with so few scores, the whole queue is in runs of equal scores, each to be sorted on
    the tie-break; so the positions are sorted once on the tie-break, then stably on whether the
    job waited less than `max_age_s`, then stably on the scores (highest first), each read in one
    pass over the jobs in their own order (at 80,000 jobs reading them in any other order costs a
    cache miss each); plain: the reference's sort on whole keys
    (`test_ordering.py::test_without_an_age_term_the_queue_is_sorted_on_whole_keys`)."""
    tiebreaks = list(map(_tiebreak(policy), queue))
    young = list(map(float(now - policy.max_age_s).__lt__, map(_SUBMIT, queue)))
    numbers = _numbers(queue, policy, priorities, now)
    order = sorted(range(len(queue)), key=tiebreaks.__getitem__)
    if True in young and False in young:
        order.sort(key=young.__getitem__)
    if numbers and numbers.count(numbers[0]) != len(numbers):
        order.sort(key=numbers.__getitem__, reverse=True)
    queue[:] = map(queue.__getitem__, order)


def _numbers(queue: list[Job], policy: Policy, priorities: Mapping[str, float], now: float) -> list[float]:
    """The score of each job (`_score`). Fast path: without an age term, the class and the team's
    priority read in C-level passes (plain: `_score` per job; `test_ordering.py`)."""
    if policy.queue_order == "fair_share" and policy.fairshare and priorities and not _age_term(policy):
        span = 2.0 + max(0.0, policy.age_weight)
        classes = map(mul, map(_PRIORITY, queue), repeat(span))
        return list(map(add, classes, map(priorities.get, map(_TEAM, queue), repeat(1.0))))
    return list(map(_score(policy, priorities, now), queue))


def _age_term(policy: Policy) -> bool:
    """Whether the fair-share score adds the job's wait (`_score`)."""
    return policy.age_weight > 0.0 and policy.max_age_s > 0.0


def _score(policy: Policy, priorities: Mapping[str, float], now: float) -> Callable[[Job], float]:
    """Higher goes first: whole priority classes (integers) times `span` stay apart, as fair-share
    scores lie in (0, 1 + age weight] (and the aged mark of shortest limit first in {0, 1})."""
    if policy.queue_order == "shortest_limit":
        oldest = now - policy.max_age_s
        return lambda job: job.priority * 2.0 + (1.0 if job.submit_s <= oldest else 0.0)
    if not (policy.fairshare and priorities):
        return lambda job: job.priority
    weight, max_age_s = max(0.0, policy.age_weight), policy.max_age_s
    span, team_priority = 2.0 + weight, priorities.get
    if _age_term(policy):
        oldest, per_s = now - max_age_s, weight / max_age_s
        return lambda job: (
            job.priority * span
            + team_priority(job.team, 1.0)
            + (weight if job.submit_s <= oldest else (now - job.submit_s) * per_s)
        )
    return lambda job: job.priority * span + team_priority(job.team, 1.0)


def _tiebreak(policy: Policy) -> Callable[[Job], tuple[float | str, ...]]:
    """Within-team order (the time limit for shortest limit first), then submit time, then job id."""
    return attrgetter(*tiebreak_fields(policy))


def tiebreak_fields(policy: Policy) -> tuple[str, ...]:
    """The fields of `Job` the within-team order sorts on (`_tiebreak`)."""
    if policy.queue_order == "shortest_limit" or policy.within_team_order == "shortest_limit":
        return ("estimate_s", "submit_s", "id")
    if policy.within_team_order == "las":
        return ("attained_gpu_s", "submit_s", "id")
    return ("submit_s", "id")


def kept_by_team(policy: Policy) -> bool | None:
    """How a `KeptQueue` groups the pending jobs for `policy`'s order: by class and team (True:
    fair share without an age term, a team's jobs that waited `max_age_s` first), by class alone
    (False: without fair share, the class then the within-team order whatever the team), or None:
    the order is sorted every cycle (an age term, or shortest limit first across teams)."""
    if _aged_first(policy):
        return True
    if policy.queue_order == "fair_share" and not policy.fairshare:
        return False
    return None


class KeptQueue:
    """The pending jobs of each priority class (and team, `by_team`) in within-team order
    (`tiebreak_fields`, all fixed while a job waits), kept as jobs join and leave the queue (by
    `FleetState`), so that a cycle orders its queue without sorting it (`QueueView.order`), and how
    many of them a node failure requeued (`failed`: only then does `order_jobs` move them).

    Fast path: sorting a queue of a few hundred jobs on tuples of its tie-break fields was the
    largest part of a cycle's order step; plain: `order_jobs` without it, which sorts
    (`test_ordering.py::test_the_queue_kept_in_within_team_order_orders_as_sorting_the_queue_does`)."""

    __slots__ = ("fields", "by_team", "tiebreak", "groups", "version", "failed")

    def __init__(self, fields: tuple[str, ...], by_team: bool, jobs: Iterable[Job]) -> None:
        self.fields, self.by_team = fields, by_team
        self.tiebreak = attrgetter(*fields)
        self.groups: dict[tuple[int, str], _Group] = {}
        self.version = 0  # bumped at every change, so that a view of an older queue is told apart
        self.failed = 0
        for job in sorted(jobs, key=self.tiebreak):
            self._group_of(job).jobs.append(job)
            self.failed += job.requeued_by_failure
        for group in self.groups.values():
            group.submits = sorted(map(_SUBMIT, group.jobs))

    def _key(self, job: Job) -> tuple[int, str]:
        return (job.priority, job.team if self.by_team else "")

    def _group_of(self, job: Job) -> _Group:
        key = self._key(job)
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = _Group()
        return group

    def add(self, job: Job) -> None:
        group = self._group_of(job)
        insort(group.jobs, job, key=self.tiebreak)
        insort(group.submits, job.submit_s)
        group.split = None
        self.failed += job.requeued_by_failure
        self.version += 1

    def remove(self, job: Job) -> None:
        """Take `job` (the object queued) out of the queue."""
        key = self._key(job)
        group = self.groups[key]
        del group.jobs[bisect_left(group.jobs, self.tiebreak(job), key=self.tiebreak)]  # (the id makes it unique)
        del group.submits[bisect_left(group.submits, job.submit_s)]
        group.split = None
        self.failed -= job.requeued_by_failure
        if not group.jobs:
            del self.groups[key]
        self.version += 1

    def view(self, pending: tuple[Job, ...]) -> QueueView:
        """The queue as it is now, which holds the jobs of `pending` (a snapshot's)."""
        return QueueView(self, self.version, pending)


class _Group:
    """One class's (and team's) pending jobs in within-team order, their submit times in order, and
    their last split into the jobs that waited `max_age_s` and the others, each in within-team
    order: (how many waited, those, the others). The jobs that waited are the first so many in
    submit order, so the split holds until the group changes or that number does."""

    __slots__ = ("jobs", "submits", "split")

    def __init__(self) -> None:
        self.jobs: list[Job] = []
        self.submits: list[float] = []
        self.split: tuple[int, list[Job], list[Job]] | None = None

    def parts(self, oldest: float) -> tuple[list[Job], list[Job]]:
        """The jobs submitted at or before `oldest`, then the others, each in within-team order."""
        waited = bisect_right(self.submits, oldest)
        split = self.split
        if split is None or split[0] != waited:
            jobs = self.jobs
            if not waited:
                split = (0, [], jobs)
            elif waited == len(jobs):
                split = (waited, jobs, [])
            else:
                split = (waited, *_waited_first(jobs, oldest))
            self.split = split
        return split[1], split[2]


class QueueView:
    """A `KeptQueue` as it was when the view was taken, and the pending jobs it then held."""

    __slots__ = ("queue", "version", "pending")

    def __init__(self, queue: KeptQueue, version: int, pending: tuple[Job, ...]) -> None:
        self.queue, self.version, self.pending = queue, version, pending

    def order(
        self, jobs: Iterable[Job], policy: Policy, priorities: Mapping[str, float], now: float
    ) -> list[Job] | None:
        """`order_jobs` of `jobs`. By class alone: the groups, highest class first. By class and team
        (a team's jobs that waited `max_age_s` first, `_aged_first`): the groups by score, highest
        first (the score of a class and team: no age term), the jobs of a group (of groups of equal
        score, merged) that waited `max_age_s` first, each part in within-team order. None unless
        `jobs` are the very pending jobs the view was taken with and the queue has not changed since
        (a view handed with a snapshot made from another with other pending jobs), or when the
        queue is kept for another order than `policy`'s."""
        queue = self.queue
        if jobs is not self.pending or queue.version != self.version:
            return None
        if queue.fields != tiebreak_fields(policy) or queue.by_team is not kept_by_team(policy):
            return None
        if not queue.by_team:
            return list(chain.from_iterable(queue.groups[key].jobs for key in sorted(queue.groups, reverse=True)))
        score, oldest = _score(policy, priorities, now), float(now - policy.max_age_s)
        by_score: dict[float, list[_Group]] = {}
        for group in queue.groups.values():
            by_score.setdefault(score(group.jobs[0]), []).append(group)
        ordered: list[Job] = []
        for number in sorted(by_score, reverse=True):
            groups = by_score[number]
            if len(groups) == 1:
                aged, young = groups[0].parts(oldest)
                ordered += aged
                ordered += young
                continue
            merged = sorted(chain.from_iterable(group.jobs for group in groups), key=queue.tiebreak)
            aged, young = _waited_first(merged, oldest)
            ordered += aged
            ordered += young
        return ordered


def _waited_first(jobs: list[Job], oldest: float) -> tuple[list[Job], list[Job]]:
    """`jobs` submitted at or before `oldest`, then the others, each in the order of `jobs`."""
    aged = list(map(oldest.__ge__, map(_SUBMIT, jobs)))
    return list(compress(jobs, aged)), list(compress(jobs, map(not_, aged)))


def _aged_first(policy: Policy) -> bool:
    """Whether a team's jobs that waited `max_age_s` go first within its fair-share score: with fair
    share and no age term in the score (`age_weight` 0), which would otherwise put them first."""
    fair_share = policy.queue_order == "fair_share" and policy.fairshare
    return fair_share and policy.age_weight <= 0.0 and policy.max_age_s > 0.0
