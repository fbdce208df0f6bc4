"""Borrowed GPU-time is what a team holds beyond its guarantee, apportioned to its runs: the rule on
its own (`scheduling.cycle.borrowed`), against a plain restatement, and in the ledger the live
cycle writes."""

from __future__ import annotations

import pytest
from django.db.models import Sum
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.cycle.borrowed import Group, Span, borrowed_split
from scheduling.models import Job, JobUsage, UsageSample
from tests.scheduling.conftest import Fleet

H100: Group = (1, "H100")
A100: Group = (1, "A100")


def span(gpus: int, from_s: float, to_s: float, *, borrowing: bool = False, group: Group = H100) -> Span:
    return Span(group, gpus, from_s, to_s, borrowing)


@pytest.mark.parametrize(
    ("spans", "guaranteed", "expected"),
    [
        pytest.param(
            [span(8, 0, 60), span(8, 0, 60), span(8, 0, 60, borrowing=True)],
            16,
            [0.0, 0.0, 8 * 60.0],
            id="the-flagged-run-carries-the-excess",
        ),
        pytest.param(
            [span(8, 0, 60), span(8, 0, 60, borrowing=True)],
            16,
            [0.0, 0.0],
            id="a-flagged-run-within-the-guarantee-borrows-nothing",
        ),
        pytest.param(
            [span(8, 0, 30), span(8, 0, 60), span(8, 0, 60, borrowing=True)],
            16,
            [0.0, 0.0, 8 * 30.0],
            id="a-run-that-ends-mid-tick-frees-the-guarantee-for-the-rest-of-it",
        ),
        pytest.param(
            [span(4, 0, 60, borrowing=True), span(12, 0, 60, borrowing=True), span(8, 0, 60)],
            12,
            [3 * 60.0, 9 * 60.0, 0.0],
            id="flagged-runs-share-in-proportion-to-their-gpus",
        ),
        pytest.param(
            [span(4, 0, 60, borrowing=True), span(8, 0, 60), span(24, 0, 60)],
            20,
            [4 * 60.0, 3 * 60.0, 9 * 60.0],
            id="beyond-the-flagged-runs-the-others-share-the-rest",
        ),
        pytest.param(
            [span(8, 0, 60, borrowing=True), span(8, 0, 60, group=A100)],
            0,
            [8 * 60.0, 8 * 60.0],
            id="without-a-guarantee-everything-is-borrowed",
        ),
        pytest.param([span(8, 60, 60, borrowing=True)], 0, [0.0], id="a-run-that-held-nothing-borrows-nothing"),
    ],
)
def test_the_excess_over_the_guarantee_is_charged_by_the_rule(
    spans: list[Span], guaranteed: int, expected: list[float]
) -> None:
    assert borrowed_split(spans, {H100: guaranteed}) == pytest.approx(expected)


def _plain(spans: list[Span], guaranteed: dict[Group, int]) -> list[float]:
    """The rule restated instant by instant: between two consecutive start or end times, the team's
    GPUs beyond its guarantee go to its flagged runs first, pro rata, then to the others, pro rata."""
    charged = [0.0] * len(spans)
    times = sorted({t for s in spans for t in (s.from_s, s.to_s)})
    for start, end in zip(times, times[1:], strict=False):
        for group in {s.group for s in spans}:
            holding = [i for i, s in enumerate(spans) if s.group == group and s.from_s <= start and s.to_s >= end]
            flagged = sum(spans[i].gpus for i in holding if spans[i].borrowing)
            others = sum(spans[i].gpus for i in holding if not spans[i].borrowing)
            excess = max(0, flagged + others - guaranteed.get(group, 0))
            for i in holding:
                pool, of = (
                    (min(excess, flagged), flagged) if spans[i].borrowing else (excess - min(excess, flagged), others)
                )
                charged[i] += pool * spans[i].gpus / of * (end - start)
    return charged


_spans = st.lists(
    st.builds(
        lambda group, gpus, start, length, borrowing: span(
            gpus, start, start + length, borrowing=borrowing, group=group
        ),
        st.sampled_from([H100, A100]),
        st.integers(1, 16),
        st.sampled_from([0.0, 10.0, 25.0, 60.0]),
        st.sampled_from([0.0, 5.0, 35.0, 60.0]),
        st.booleans(),
    ),
    max_size=12,
)


@settings(max_examples=200, deadline=None, database=None)
@given(spans=_spans, h100=st.integers(0, 40), a100=st.integers(0, 40))
def test_the_split_agrees_with_the_plain_rule_sums_to_the_excess_and_stays_within_allocated(
    spans: list[Span], h100: int, a100: int
) -> None:
    guaranteed = {H100: h100, A100: a100}
    split = borrowed_split(spans, guaranteed)

    assert split == pytest.approx(_plain(spans, guaranteed), abs=1e-9)
    for share, s in zip(split, spans, strict=True):
        assert -1e-9 <= share <= s.gpus * (s.to_s - s.from_s) + 1e-9
    # Per group, the runs' shares sum to the integral of the GPUs held beyond the guarantee.
    times = sorted({t for s in spans for t in (s.from_s, s.to_s)})
    for group, limit in guaranteed.items():
        excess = sum(
            max(0, sum(s.gpus for s in spans if s.group == group and s.from_s <= a and s.to_s >= b) - limit) * (b - a)
            for a, b in zip(times, times[1:], strict=False)
        )
        charged = sum(share for share, s in zip(split, spans, strict=True) if s.group == group)
        assert charged == pytest.approx(excess, abs=1e-9)


def test_a_team_back_at_its_guarantee_books_no_borrowed_time_for_its_flagged_run(fleet: Fleet) -> None:
    # The team is guaranteed 16 of the 32 GPUs. Three 8-GPU jobs: the third to start borrows 8.
    # The short one ends half-way through a tick; from then on the team holds 16 again: the
    # borrowing run sits within the guarantee the short one freed, and the team borrows nothing,
    # though the run keeps its flag.
    short = fleet.submit(gpus=8, duration_s=630.0, name="short")
    fleet.submit(gpus=8, duration_s=4 * 3600.0, name="long")
    fleet.submit(gpus=8, duration_s=4 * 3600.0, name="loan")
    for _ in range(20):
        fleet.tick()
    short.refresh_from_db()
    flagged = Job.objects.get(state=Job.State.RUNNING, borrowing=True)
    assert short.state == Job.State.COMPLETED and not short.borrowing
    assert Job.objects.filter(state=Job.State.RUNNING).count() == 2

    ticks = UsageSample.objects.values("sim_time_s", "interval_s").annotate(
        allocated=Sum("allocated_gpu_s"), borrowed=Sum("borrowed_gpu_s")
    )
    held = {round(t["allocated"] / t["interval_s"], 6) for t in ticks}
    assert {24.0, 16.0, 20.0} <= held, held  # 20: the tick in which the short job ends, half-way
    # The team never held fewer than its 16 GPUs while it held any, so each tick's borrowed time
    # is its allocated time beyond 16 GPUs: 8 GPUs while it held 24, none once back at 16.
    for t in ticks:
        assert t["borrowed"] == pytest.approx(max(0.0, t["allocated"] - 16 * t["interval_s"]), abs=1e-6), t

    # The per-job ledger carries exactly the team's borrowed time, all of it on the flagged run.
    team = UsageSample.objects.aggregate(borrowed=Sum("borrowed_gpu_s"))["borrowed"]
    jobs = dict(JobUsage.objects.values_list("job_id").annotate(Sum("borrowed_gpu_s")))
    assert team > 0
    assert sum(jobs.values()) == pytest.approx(team, abs=1e-6)
    assert jobs[flagged.pk] == pytest.approx(team, abs=1e-6)
