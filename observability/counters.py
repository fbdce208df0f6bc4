"""Counters over the product's append-only history (scheduler events, the usage ledger), at a
cost that does not grow with the history.

The rule (``counter_totals_plain``): a counter is the aggregate over every row of its source.
Counting the whole history at each scrape is that rule, but its cost grows with the history
(the ledger gains a few dozen rows per tick). So each source keeps a checkpoint in the database:
the totals over its rows up to some id. A scrape adds to it the rows settled since (``stamp``
older than ``SETTLE_AFTER_S``: rows are written by short transactions, so by then every row
with a lower id has committed too and none can appear below the checkpoint later), saves the
new checkpoint under a guarded update (concurrent scrapes: one wins, the others still answer
with the same totals), and counts the unsettled rows live. The checkpoint lives in the database,
not in a process, so every web process answers the same figures and they survive restarts.
``tests/observability/test_counters.py`` checks that the two ways agree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db.models import Count, Model, Q, QuerySet, Sum
from django.utils import timezone

from observability.models import CounterCheckpoint
from scheduling.models import SchedulerEvent, UsageSample

# A row older than this has committed, and so has every row with a lower id.
SETTLE_AFTER_S = 300.0
# An eviction whose cause names a node is a failure's (or a drain's), not a preemption's; events
# written before causes had their own field named it in their message.
FAILURE_CAUSE_PREFIX = "node-"
FAILURE_EVICTION_PREFIX = "Evicted (node-"

Key = tuple[Any, ...]
Totals = dict[Key, tuple[float, ...]]


@dataclass(frozen=True)
class Source:
    """``aggregate`` groups a queryset of the source's rows by ``keys`` into ``values``."""

    name: str
    model: type[Model]
    stamp: str
    keys: tuple[str, ...]
    values: tuple[str, ...]
    aggregate: Callable[[QuerySet[Any]], QuerySet[Any]]


EVENTS = Source(
    name="scheduler-events",
    model=SchedulerEvent,
    stamp="created_at",
    keys=("team_id",),
    values=("starts", "preemptions"),
    aggregate=lambda rows: (
        rows.filter(kind__in=(SchedulerEvent.Kind.STARTED, SchedulerEvent.Kind.EVICTED))
        .values("team_id")
        .annotate(
            starts=Count("id", filter=Q(kind=SchedulerEvent.Kind.STARTED)),
            preemptions=Count(
                "id",
                filter=Q(kind=SchedulerEvent.Kind.EVICTED)
                & ~Q(message__startswith=FAILURE_EVICTION_PREFIX)
                & ~Q(cause__startswith=FAILURE_CAUSE_PREFIX),
            ),
        )
        .order_by()
    ),
)
LEDGER = Source(
    name="usage-ledger-lost",
    model=UsageSample,
    stamp="recorded_at",
    keys=("team_id", "accelerator_type_id"),
    values=("lost_gpu_s",),
    aggregate=lambda rows: (
        rows.filter(lost_gpu_s__gt=0)
        .values("team_id", "accelerator_type_id")
        .annotate(lost_gpu_s=Sum("lost_gpu_s"))
        .order_by()
    ),
)


def _totals(source: Source, rows: QuerySet[Any]) -> Totals:
    return {
        tuple(row[key] for key in source.keys): tuple(float(row[value] or 0) for value in source.values)
        for row in source.aggregate(rows)
    }


def _add(a: Totals, b: Totals) -> Totals:
    result = dict(a)
    for key, values in b.items():
        before = result.get(key)
        result[key] = values if before is None else tuple(x + y for x, y in zip(before, values, strict=True))
    return result


def counter_totals_plain(source: Source) -> Totals:
    """The rule: the aggregate over every row of the source."""
    return _totals(source, source.model._default_manager.all())


def counter_totals(source: Source) -> Totals:
    """The same totals, from the checkpoint plus the rows since (three to five queries)."""
    saved = CounterCheckpoint.objects.filter(name=source.name).values_list("upto_id", "totals").first()
    upto_id, stored = saved if saved is not None else (0, [])
    checkpoint: Totals = {tuple(key): tuple(values) for key, values in stored}
    cutoff = timezone.now() - timedelta(seconds=SETTLE_AFTER_S)
    settled_upto = (
        source.model._default_manager.filter(id__gt=upto_id, **{f"{source.stamp}__lt": cutoff})
        .order_by("-id")
        .values_list("id", flat=True)
        .first()
    )
    if settled_upto is not None:
        settled = _totals(source, source.model._default_manager.filter(id__gt=upto_id, id__lte=settled_upto))
        checkpoint = _add(checkpoint, settled)
        _checkpoint_save(source, saved is not None, upto_id, settled_upto, checkpoint)
        upto_id = settled_upto
    return _add(checkpoint, _totals(source, source.model._default_manager.filter(id__gt=upto_id)))


def _checkpoint_save(source: Source, exists: bool, from_id: int, to_id: int, totals: Totals) -> None:
    """Move the checkpoint from ``from_id`` to ``to_id``, unless another scrape moved it first."""
    stored = [[list(key), list(values)] for key, values in sorted(totals.items(), key=repr)]
    if not exists:
        CounterCheckpoint.objects.bulk_create(
            [CounterCheckpoint(name=source.name, upto_id=to_id, totals=stored)], ignore_conflicts=True
        )
        return
    CounterCheckpoint.objects.filter(name=source.name, upto_id=from_id).update(upto_id=to_id, totals=stored)
