"""What the recorder keeps between events gives the metrics recomputing it at every event gives."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.engine import Job, Policy
from scheduling.sim.fleet import parse_fleet
from scheduling.sim.recorder import Recorder
from scheduling.sim.simulator import SimulationStalled, run_simulation

from .test_gate import QUOTA_TEAMS, contended_traces


def _metrics(jobs: list[Job], policy: Policy) -> dict[str, object]:
    try:
        result = run_simulation(jobs, parse_fleet("1x2x2x8").nodes(), policy, quotas=QUOTA_TEAMS)
    except SimulationStalled as stalled:
        return {"stalled": str(stalled)}
    return {key: value for key, value in result.metrics.items() if key not in ("sim_wall_s", "events_per_s")}


@settings(max_examples=60, deadline=None, database=None)
@given(jobs=contended_traces(), policy=st.sampled_from((Policy(), Policy.easy(), Policy.fifo())))
def test_the_kept_rates_entitlements_and_unmet_demand_give_the_metrics_recomputed_ones_give(
    jobs: list[Job], policy: Policy
) -> None:
    kept = _metrics(jobs, policy)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Recorder, "_rates", Recorder.plain_rates)
        patch.setattr(Recorder, "_unmet", Recorder.plain_unmet)
        patch.setattr(Recorder, "_refresh_entitlements", Recorder.plain_entitlements)
        recomputed = _metrics(jobs, policy)
    assert kept == recomputed
