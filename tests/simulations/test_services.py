"""Starting, running and cancelling what-if replays through the services: everything is checked
before anything is written, and a replay ends succeeded, failed or cancelled with its reason."""

from __future__ import annotations

import zlib
from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from portal.celery import app
from scheduling.models import FleetClock, Job
from simulations.models import Simulation
from simulations.services import ReplayStopped, _Progress, simulation_cancel, simulation_run, simulation_start
from simulations.tasks import simulation_run_task
from tests.factories import (
    AcceleratorTypeFactory,
    FleetPolicyFactory,
    NodeFactory,
    PriorityClassFactory,
    QuotaFactory,
    RackFactory,
)
from tests.simulations.conftest import BAD_TRACE, GOOD_TRACE, People, trace_request

CONTRACT = {
    "capacity_gpus", "jobs", "window_s", "utilisation", "goodput", "offered_load", "limit_ratio", "jct_mean_s",
    "jct_p50_s", "jct_p95_s", "jct_p99_s", "wait_mean_s", "wait_p99_s", "bounded_slowdown_mean", "jain_fairness",
    "guarantee_violation_gpu_hours", "fragmentation_idle_fraction", "racks_per_multinode_job_mean",
    "topology_optimal_fraction", "preemptions", "preemption_lost_gpu_hours", "failures", "mttd_mean_s", "mttr_mean_s",
    "failure_lost_gpu_hours", "serving_slo_attainment", "estimate_error_p50", "estimate_error_p90", "sim_wall_s",
    "events_per_s",
}  # fmt: skip


def _errors(excinfo: pytest.ExceptionInfo[ValidationError]) -> dict[str, list[str]]:
    return excinfo.value.message_dict


def test_an_admin_replays_a_trace_beside_the_current_policy(people: People) -> None:
    FleetPolicyFactory(backfill=False)
    simulation = simulation_start(
        user=people.admin, request=trace_request(preset="fleetline", policy_settings={"reservation_depth": 2})
    )
    assert (simulation.state, simulation.jobs, simulation.team) == ("queued", 4, None)

    assert simulation_run(simulation_id=simulation.pk) == "succeeded"

    simulation.refresh_from_db()
    assert simulation.progress == 1.0
    assert simulation.finished_at is not None
    results = simulation.results
    assert results["candidate"]["policy"] == "candidate"
    assert results["current"]["policy"] == "current"
    assert results["meta"]["jobs"] == 4
    # Every key of the simulator's metrics contract, for both policies.
    assert CONTRACT <= set(results["candidate"])
    assert set(results["current"]) == set(results["candidate"])
    report = zlib.decompress(bytes(simulation.report_html_z)).decode()
    assert "Fleet simulation" in report and "plotly" in report.lower()


def test_a_bad_trace_gets_the_importers_line_numbered_errors_and_writes_nothing(people: People) -> None:
    with pytest.raises(ValidationError) as excinfo:
        simulation_start(user=people.admin, request=trace_request(trace_name="my jobs.csv", trace_data=BAD_TRACE))
    assert _errors(excinfo)["trace"] == [
        "my_jobs.csv:3: column 'duration': 'soon' is not a number",
        "my_jobs.csv:4: column 'gpus': 0 is below the minimum 1",
    ]
    assert not Simulation.objects.exists()


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"trace_data": b"\xff\xfe"}, "trace", "not UTF-8"),
        ({"trace_data": b"job_id,submit_time,duration,gpus,team\n"}, "trace", "no job to replay"),
        ({"trace_data": None}, "trace", "Choose a trace file"),
        ({"trace_format": "slurm"}, "trace_format", "Unknown format"),
        ({"preset": "magic"}, "preset", "Unknown policy"),
        ({"policy_settings": {"warp_drive": True}}, "policy_settings", "Unknown setting 'warp_drive'"),
        ({"policy_settings": {"reservation_depth": 99}}, "reservation_depth", "between 1 and 16"),
        ({"policy_settings": {"backfill": "yes"}}, "backfill", "true or false"),
        ({"policy_settings": {"age_weight": float("nan")}}, "age_weight", "finite"),
        ({"policy_settings": {"age_weight": 10**400}}, "age_weight", "finite"),
        ({"policy_settings": {"within_team_order": "random"}}, "within_team_order", "one of"),
        ({"fleet_spec": "/etc/fleet.json"}, "fleet_spec", "PODSxRACKSxNODESxGPUS"),
        ({"fleet_spec": "64x64x64x8"}, "fleet_spec", "At most 4,096 nodes"),
        ({"source": "history", "history_days": 0}, "history_days", "more than 0"),
        ({"source": "history", "history_days": None}, "history_days", "how many days"),
        ({"source": "tape"}, "source", "Unknown source"),
    ],
)
def test_each_bad_input_is_refused_beside_its_field(
    people: People, overrides: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(ValidationError) as excinfo:
        simulation_start(user=people.admin, request=trace_request(**overrides))
    assert message in " ".join(_errors(excinfo)[field])
    assert not Simulation.objects.exists()


def test_the_file_size_and_job_count_are_bounded(people: People, settings: Any) -> None:
    settings.SIMULATION_MAX_TRACE_BYTES = 50
    with pytest.raises(ValidationError) as excinfo:
        simulation_start(user=people.admin, request=trace_request())
    assert "at most 50" in _errors(excinfo)["trace"][0]
    settings.SIMULATION_MAX_TRACE_BYTES = 10_000
    settings.SIMULATION_MAX_JOBS = 3
    with pytest.raises(ValidationError) as excinfo:
        simulation_start(user=people.admin, request=trace_request())
    assert _errors(excinfo)["trace"] == ["4 jobs; a replay takes at most 3."]
    assert not Simulation.objects.exists()


def test_a_replay_that_runs_out_of_wall_time_fails_and_says_so(people: People, settings: Any) -> None:
    simulation = simulation_start(user=people.admin, request=trace_request())
    settings.SIMULATION_MAX_WALL_S = 0
    assert simulation_run(simulation_id=simulation.pk) == "failed"
    simulation.refresh_from_db()
    assert "the bound for one replay" in simulation.error
    assert simulation.results is None


def test_a_lead_replays_only_their_own_teams_jobs_from_the_fleet_history(people: People) -> None:
    h100 = AcceleratorTypeFactory(name="H100")
    NodeFactory.create_batch(2, accelerator_type=h100, rack=RackFactory())
    QuotaFactory(team=people.alpha, accelerator_type=h100, guaranteed=8)
    QuotaFactory(team=people.beta, accelerator_type=h100, guaranteed=8)
    FleetClock.objects.update_or_create(pk=1, defaults={"sim_now_s": 10 * 86400.0, "wall_updated_at": timezone.now()})
    training = PriorityClassFactory(name="training")
    common = {"name": "j", "gpus": 8, "priority_class": training, "accelerator_type": h100, "duration_s": 600.0}
    for team, submit_s in [(people.alpha, 9.5 * 86400), (people.alpha, 9.9 * 86400), (people.beta, 9.8 * 86400)]:
        Job.objects.create(team=team, submit_s=submit_s, **common)
    Job.objects.create(team=people.alpha, submit_s=0.0, **common)  # older than the period
    request = trace_request(source="history", history_days=1, team=people.alpha, fleet_spec="")
    simulation = simulation_start(user=people.lead, request=request)
    assert simulation.jobs == 2
    assert simulation.fleet_spec == "1x1x2x8:H100"  # the live fleet's shape

    # The jobs are frozen when the replay is asked for: one submitted since is not replayed.
    Job.objects.create(team=people.alpha, submit_s=9.95 * 86400, **common)
    assert simulation_run(simulation_id=simulation.pk) == "succeeded"
    simulation.refresh_from_db()
    assert simulation.results["meta"]["teams"] == ["alpha"]
    assert simulation.results["candidate"]["jobs"] == 2


def test_a_fleet_too_small_for_the_guarantees_is_refused(people: People) -> None:
    h100 = AcceleratorTypeFactory(name="H100")
    QuotaFactory(team=people.alpha, accelerator_type=h100, guaranteed=64)
    with pytest.raises(ValidationError) as excinfo:
        simulation_start(user=people.admin, request=trace_request(fleet_spec="1x1x2x8:H100"))
    assert "Too small for the teams' guarantees" in _errors(excinfo)["fleet_spec"][0]


@pytest.mark.parametrize(
    ("who", "team"),
    [("member", "alpha"), ("outsider", "alpha"), ("lead", None), ("member", None)],
)
def test_only_admins_and_the_teams_leads_start_replays(people: People, who: str, team: str | None) -> None:
    with pytest.raises(PermissionDenied):
        simulation_start(user=getattr(people, who), request=trace_request(team=getattr(people, team) if team else None))
    assert not Simulation.objects.exists()


def test_a_queued_replay_is_cancelled_at_once_and_never_runs(people: People) -> None:
    simulation = simulation_start(user=people.lead, request=trace_request(team=people.alpha))
    assert simulation_cancel(simulation=simulation).state == "cancelled"
    assert simulation_run(simulation_id=simulation.pk) is None
    simulation.refresh_from_db()
    assert (simulation.state, simulation.results) == ("cancelled", None)


def test_a_running_replay_stops_at_its_next_progress_report_once_cancelled(people: People) -> None:
    simulation = simulation_start(user=people.admin, request=trace_request())
    Simulation.objects.filter(pk=simulation.pk).update(state="running")
    progress = _Progress(simulation.pk, policies=2)
    progress.for_policy("candidate")
    progress.report(0.5, force=True)
    assert Simulation.objects.get(pk=simulation.pk).progress == 0.25

    assert simulation_cancel(simulation=simulation).cancel_requested
    with pytest.raises(ReplayStopped) as excinfo:
        progress.report(0.75, force=True)
    assert excinfo.value.state == "cancelled"


def test_a_replay_is_run_once_even_when_its_task_is_delivered_twice(people: People) -> None:
    simulation = simulation_start(user=people.admin, request=trace_request(trace_data=GOOD_TRACE))
    assert simulation_run(simulation_id=simulation.pk) == "succeeded"
    assert simulation_run(simulation_id=simulation.pk) is None


def test_a_replay_whose_worker_died_is_cancelled_at_once_or_run_again(people: People, settings: Any) -> None:
    simulation = simulation_start(user=people.admin, request=trace_request())
    long_ago = timezone.now() - timedelta(seconds=settings.SIMULATION_MAX_WALL_S + 300)
    Simulation.objects.filter(pk=simulation.pk).update(state="running", started_at=long_ago)
    # Delivered again after its worker died: claimed again and run to its end.
    assert simulation_run(simulation_id=simulation.pk) == "succeeded"

    other = simulation_start(user=people.admin, request=trace_request())
    Simulation.objects.filter(pk=other.pk).update(state="running", started_at=long_ago)
    assert simulation_cancel(simulation=other).state == "cancelled"


def test_serving_replicas_are_replayed_until_the_end_of_the_period_not_for_a_year(people: People) -> None:
    from scheduling.models import ServingDeployment
    from simulations.inputs import history_trace

    h100 = AcceleratorTypeFactory(name="H100")
    serving = PriorityClassFactory(name="serving", kind="serving", value=900, preemptible=False)
    FleetClock.objects.update_or_create(pk=1, defaults={"sim_now_s": 10 * 86400.0})
    deployment = ServingDeployment.objects.create(
        team=people.alpha, name="chat", priority_class=serving, accelerator_type=h100
    )
    common = {"team": people.alpha, "gpus": 8, "priority_class": serving, "accelerator_type": h100}
    Job.objects.create(name="replica", kind="serving", deployment=deployment, duration_s=365 * 86400.0,
                       submit_s=9.5 * 86400, **common)  # fmt: skip
    Job.objects.create(name="one-off", kind="serving", duration_s=7200.0, submit_s=9.6 * 86400, **common)
    trace = history_trace(days=1, team=people.alpha)
    assert [(job.job_id != "", job.duration_s) for job in trace] == [(True, 0.5 * 86400), (True, 7200.0)]


def test_a_replay_runs_on_the_simulations_queue_apart_from_the_cycle() -> None:
    assert app.amqp.router.route({}, simulation_run_task.name)["queue"].name == "simulations"
    assert app.amqp.router.route({}, "scheduling.tasks.fleet_cycle")["queue"].name == "cycle"
