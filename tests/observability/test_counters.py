"""The checkpointed counters give the same totals as counting the whole history, whatever the
order of writes and scrapes, and a scrape reads only the rows since the checkpoint."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from observability.counters import EVENTS, LEDGER, SETTLE_AFTER_S, counter_totals, counter_totals_plain
from observability.models import CounterCheckpoint
from scheduling.models import SchedulerEvent, UsageSample
from tests.factories import AcceleratorTypeFactory, TeamFactory


def _close(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        all(x == pytest.approx(y) for x, y in zip(a[key], b[key], strict=True)) for key in a
    )


def test_checkpointed_totals_agree_with_counting_every_row(db: None) -> None:
    rng = random.Random(7)
    teams = [TeamFactory(), TeamFactory()]
    h100 = AcceleratorTypeFactory(name="H100")
    now = timezone.now()
    messages = ["Started", "Evicted (preempted); 1 GPU-h", "Evicted (node-failed); 2 GPU-h", "Completed"]
    for step in range(300):
        # Rows arrive old (settled) and new (not yet settled) in any order.
        stamp = now - timedelta(seconds=rng.choice([0, 10, SETTLE_AFTER_S + 60, 3600]))
        choice = rng.random()
        if choice < 0.45:
            message = rng.choice(messages)
            kind = {"S": "started", "E": "evicted", "C": "completed"}[message[0]]
            event = SchedulerEvent.objects.create(
                team=rng.choice(teams + [None]), kind=kind, sim_time_s=step, message=message
            )
            SchedulerEvent.objects.filter(pk=event.pk).update(created_at=stamp)
        elif choice < 0.9:
            UsageSample.objects.create(
                sim_time_s=step, interval_s=1.0, recorded_at=stamp, team=rng.choice(teams), accelerator_type=h100,
                kind="training", lost_gpu_s=rng.choice([0.0, 30.0, 7.5]),
            )  # fmt: skip
        else:
            for source in (EVENTS, LEDGER):
                assert _close(counter_totals(source), counter_totals_plain(source)), (step, source.name)
    assert CounterCheckpoint.objects.filter(name__in=[EVENTS.name, LEDGER.name]).count() == 2


def test_a_scrape_reads_only_the_rows_since_the_checkpoint(db: None, django_assert_num_queries: Any) -> None:
    team = TeamFactory()
    old = timezone.now() - timedelta(hours=1)
    for _ in range(3):
        event = SchedulerEvent.objects.create(team=team, kind="started", sim_time_s=0.0)
        SchedulerEvent.objects.filter(pk=event.pk).update(created_at=old)
    # The first scrape settles the old rows into the checkpoint: five queries.
    with django_assert_num_queries(5):
        assert counter_totals(EVENTS) == {(team.pk,): (3.0, 0.0)}
    checkpoint = CounterCheckpoint.objects.get(name=EVENTS.name)
    assert checkpoint.upto_id == event.pk
    SchedulerEvent.objects.create(team=team, kind="started", sim_time_s=1.0)
    # Later scrapes count only the unsettled rows beyond it: three queries.
    with django_assert_num_queries(3):
        assert counter_totals(EVENTS) == {(team.pk,): (4.0, 0.0)}


def test_a_scrape_that_lost_the_race_to_move_the_checkpoint_still_answers_the_totals(db: None) -> None:
    team = TeamFactory()
    old = timezone.now() - timedelta(hours=1)
    event = SchedulerEvent.objects.create(team=team, kind="started", sim_time_s=0.0)
    SchedulerEvent.objects.filter(pk=event.pk).update(created_at=old)
    counter_totals(EVENTS)
    # Another scrape moved the checkpoint past this one's view meanwhile: its guarded update
    # changes nothing, and the totals stay right.
    CounterCheckpoint.objects.filter(name=EVENTS.name).update(upto_id=0, totals=[])
    second = SchedulerEvent.objects.create(team=team, kind="started", sim_time_s=1.0)
    SchedulerEvent.objects.filter(pk=second.pk).update(created_at=old)
    assert counter_totals(EVENTS) == counter_totals_plain(EVENTS) == {(team.pk,): (2.0, 0.0)}
