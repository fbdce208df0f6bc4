"""Serving on the simulated fleet: hand-computed attainment, priority over training, checkpoints,
static splits, and deployment files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduling.engine import Event, Evicted, Started
from scheduling.engine.serving import Deployment, TraceDemand
from scheduling.sim.cli import main
from scheduling.sim.fleet import SpecError, parse_fleet
from scheduling.sim.serving import load_deployments, simulate_serving
from scheduling.sim.simulator import SimResult

from .builders import job

# One 8-GPU replica, then three from 1,000 s to 2,000 s, then one again until 3,000 s.
STEP = TraceDemand(((0.0, 1), (1000.0, 3), (2000.0, 1)))
WINDOW = (0.0, 3000.0)


class Watch:
    """A hook that only records what happens."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def next_time(self) -> float | None:
        return None

    def on_time(self, sim: object, now: float) -> list[Event]:
        return []

    def metrics(self) -> dict[str, object]:
        return {}

    def observe(self, events: list[Event]) -> None:
        self.events.extend(events)


def run(fleet: str, jobs: list, slo_s: float = 60.0, layout: str = "shared", watch: Watch | None = None) -> SimResult:
    deployment = Deployment("chat", "web", STEP, gpus_per_replica=8, slo_s=slo_s)
    return simulate_serving(
        jobs, parse_fleet(fleet).nodes(), [deployment], layout=layout, window=WINDOW, hooks=[watch] if watch else ()
    )


def test_attainment_counts_the_replica_seconds_a_too_small_fleet_could_not_serve() -> None:
    # Two nodes: the third replica asked at 1,000 s never starts before demand withdraws it at 2,000 s.
    # Demanded: 3,000 + 1,000 + 1,000 replica-seconds; served: 3,000 + 1,000.
    metrics = run("1x1x2x8", []).metrics
    assert metrics["serving_slo_attainment"] == pytest.approx(4000 / 5000)
    assert metrics["serving_start_p99_s"] == pytest.approx(0.0)
    assert metrics["serving_utilisation"] == pytest.approx((3000 + 1000) * 8 / (16 * 3000))
    assert metrics["training_preemptions_by_serving"] == 0


def test_a_replica_that_takes_trainings_gpus_serves_after_the_grace_period() -> None:
    # The training job holds the second node; the replica asked at 1,000 s evicts it and serves from
    # 1,030 s (30 s grace), within a 60 s objective, so its start-up counts as met.
    training = job("t1", 0.0, 8, 10_000.0)
    metrics = run("1x1x2x8", [training]).metrics
    assert metrics["serving_slo_attainment"] == pytest.approx(4000 / 5000)
    assert metrics["serving_start_p99_s"] == pytest.approx(30.0, abs=0.5)
    assert metrics["training_preemptions_by_serving"] == 1
    # No checkpoint: the 1,000 s it ran are lost, plus the grace period of its 8 GPUs.
    assert metrics["training_lost_gpu_hours_by_serving"] == pytest.approx((1000 * 8 + 30 * 8) / 3600)


def test_a_start_later_than_the_objective_misses_its_whole_wait() -> None:
    training = job("t1", 0.0, 8, 10_000.0)
    metrics = run("1x1x2x8", [training], slo_s=10.0).metrics
    assert metrics["serving_slo_attainment"] == pytest.approx((3000 + 970) / 5000)


def test_training_preempted_by_serving_resumes_from_its_checkpoint() -> None:
    periodic = job("t1", 0.0, 8, 10_000.0, checkpoint_interval_s=300.0)
    result = run("1x1x2x8", [periodic])
    # Rolled back from 1,000 s to its checkpoint at 900 s, restarted when the replica left at 2,000 s.
    assert result.metrics["training_lost_gpu_hours_by_serving"] == pytest.approx((100 * 8 + 30 * 8) / 3600)
    assert result.jct_by_job["t1"] == pytest.approx(2000 + 10_000 - 900)

    on_signal = job("t1", 0.0, 8, 10_000.0, checkpoint_on_preempt=True)
    result = run("1x1x2x8", [on_signal])
    # It checkpoints when told: it loses only the grace period, and resumes from 1,000 s of work.
    assert result.metrics["training_lost_gpu_hours_by_serving"] == pytest.approx(30 * 8 / 3600)
    assert result.jct_by_job["t1"] == pytest.approx(2000 + 10_000 - 1000)


def test_a_replica_is_never_evicted_by_training_even_of_a_higher_priority() -> None:
    watch = Watch()
    urgent = job("t1", 500.0, 16, 1000.0, priority=1000)
    result = run("1x1x2x8", [job("t0", 0.0, 8, 100.0), urgent], watch=watch)
    evicted = [e.job_id for e in watch.events if isinstance(e, Evicted)]
    assert not any("/replica-" in job_id for job_id in evicted)
    # The 16-GPU job waits until the fleet holds no replica (demand ends with the window).
    started = next(e for e in watch.events if isinstance(e, Started) and e.job_id == "t1")
    assert started.time_s == pytest.approx(WINDOW[1])
    # Ordered first, it holds the free node for itself: the replicas asked at 1,000 s wait.
    assert result.metrics["serving_slo_attainment"] == pytest.approx(3000 / 5000)


@pytest.mark.parametrize("layout", ["static-peak", "static-mean"])
def test_static_splits_never_share_gpus_across_the_split(layout: str) -> None:
    watch = Watch()
    jobs = [job(f"t{i}", 100.0 * i, 8, 700.0) for i in range(20)]
    result = run("1x1x4x8", jobs, layout=layout, watch=watch)
    partition = {"static-peak": 3, "static-mean": 2}[layout]  # nodes: peak 24 GPUs, mean 13.3
    serving_nodes = {f"p00-r00-n{n:02d}" for n in range(4 - partition, 4)}
    for event in watch.events:
        if isinstance(event, Started):
            nodes = {node for node, _ in event.allocation}
            if "/replica-" in event.job_id:
                assert nodes <= serving_nodes
            else:
                assert not nodes & serving_nodes
    assert result.metrics["training_preemptions_by_serving"] == 0
    if layout == "static-peak":
        assert result.metrics["serving_slo_attainment"] == pytest.approx(1.0)
    else:
        assert result.metrics["serving_slo_attainment"] == pytest.approx(4000 / 5000)


def test_the_shared_fleet_splits_utilisation_between_serving_and_training() -> None:
    # The training trace's window (first to last submission) is the serving window.
    jobs = [job("t1", 0.0, 8, 10_000.0, checkpoint_on_preempt=True), job("t2", 3000.0, 8, 100.0)]
    metrics = run("1x1x2x8", jobs).metrics
    assert metrics["serving_utilisation"] == pytest.approx((3000 + 1000) * 8 / (16 * 3000))
    assert metrics["serving_utilisation"] + metrics["training_utilisation"] == pytest.approx(metrics["utilisation"])
    assert metrics["serving_goodput"] + metrics["training_goodput"] == pytest.approx(metrics["goodput"])


def test_deployments_load_from_json_and_csv(tmp_path: Path) -> None:
    json_file = tmp_path / "deployments.json"
    json_file.write_text(
        json.dumps(
            [
                {"name": "chat", "team": "web", "min_replicas": 2, "max_replicas": 6, "serving_slo_s": 120},
                {"name": "embed", "team": "web", "gpus_per_replica": 1, "replicas": [[0, 1], [3600, 4]]},
            ]
        )
    )
    chat, embed = load_deployments(json_file)
    assert chat.demand.replicas_at(14 * 3600) == 6 and chat.slo_s == 120 and chat.gpus_per_replica == 8
    assert embed.demand.replicas_at(3599) == 1 and embed.demand.replicas_at(3600) == 4

    csv_file = tmp_path / "deployments.csv"
    csv_file.write_text(
        "name,team,min_replicas,max_replicas,peak_hour,replicas\nchat,web,1,3,20,\nbatch,web,,,,0:2;60:0\n"
    )
    chat, batch = load_deployments(csv_file)
    assert chat.demand.replicas_at(20 * 3600) == 3
    assert batch.demand.replicas_at(30) == 2 and batch.demand.replicas_at(60) == 0


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"name": "a", "min_replicas": 3, "max_replicas": 1}, "min_replicas <= max_replicas"),
        ({"name": "a", "max_replicas": 1}, "min_replicas is required"),
        ({"name": "a", "min_replicas": 1, "max_replicas": 2, "gpus": 8}, "unknown field 'gpus'"),
        ({"name": "a", "replicas": [[10, 1], [5, 2]]}, "increase strictly"),
        ({"name": "a", "min_replicas": 1, "max_replicas": 2, "serving_slo_s": "soon"}, "must be a number"),
    ],
)
def test_a_bad_deployment_file_names_the_row_and_the_field(tmp_path: Path, row: dict, message: str) -> None:
    path = tmp_path / "deployments.json"
    path.write_text(json.dumps([row]))
    with pytest.raises(SpecError, match="deployment 1") as error:
        load_deployments(path)
    assert message in str(error.value)


def test_the_simulator_cli_runs_deployments_from_a_file_next_to_the_trace(capsys: pytest.CaptureFixture[str]) -> None:
    sample = Path(__file__).resolve().parents[2] / "scheduling" / "sim" / "data" / "itp-sample"
    args = ["--format", "itp", "--trace", str(sample / "cluster05.csv"), "--fleet", "1x2x4x8", "--json", "-"]
    assert main([*args, "--serving", str(sample / "serving.json")]) == 0
    result = json.loads(capsys.readouterr().out)["results"][0]
    assert 0.0 < result["serving_slo_attainment"] <= 1.0
    assert result["serving_utilisation"] > 0.0
    assert result["training_utilisation"] == pytest.approx(result["utilisation"] - result["serving_utilisation"])


def test_a_replica_larger_than_a_node_takes_whole_nodes() -> None:
    watch = Watch()
    odd = Deployment("big", "web", TraceDemand(((0.0, 1),)), gpus_per_replica=12)
    simulate_serving([], parse_fleet("1x1x2x8").nodes(), [odd], window=WINDOW, hooks=[watch])
    (started,) = [e for e in watch.events if isinstance(e, Started)]
    assert sorted(started.allocation) == [("p00-r00-n00", 8), ("p00-r00-n01", 8)]
