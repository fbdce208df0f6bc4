"""The quota benchmark's Philly case: the canonical trace read with its own teams, on a tiny synthetic file."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "sim_quotas.py"

HEADER = "job_id,submit_time,duration,gpus,team\n"
# Out of submit order on purpose, three teams, one two-node gang, short and long jobs.
ROWS = [
    ("p3", 900, 120, 1, "b7"),
    ("p0", 0, 60, 2, "a1"),
    ("p1", 30, 7200, 1, "a1"),
    ("p2", 60, 400, 16, "c2"),
    ("p4", 1200, 30, 1, "a1"),
    ("p5", 1500, 3600, 4, "b7"),
]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sim_quotas_philly", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write(path: Path, rows: list[tuple[object, ...]]) -> Path:
    path.write_text(HEADER + "".join(",".join(str(value) for value in row) + "\n" for row in rows))
    return path


def test_the_philly_loader_reads_the_canonical_file_in_submit_order_with_the_traces_own_teams(bench, tmp_path) -> None:
    trace = bench.load_philly(write(tmp_path / "jobs.csv", ROWS))
    assert [job.job_id for job in trace] == ["p0", "p1", "p2", "p3", "p4", "p5"]
    assert [(job.submit_s, job.duration_s, job.gpus, job.team) for job in trace][:3] == [
        (0.0, 60.0, 2, "a1"),
        (30.0, 7200.0, 1, "a1"),
        (60.0, 400.0, 16, "c2"),
    ]
    assert {job.team for job in trace} == {"a1", "b7", "c2"}
    # No checkpoints, limits or priorities are recorded: the cases add them.
    assert {(job.checkpoint_interval_s, job.time_limit_s, job.priority) for job in trace} == {(None, None, 0)}
    assert bench.load_philly(tmp_path) == trace  # a directory is read as its jobs.csv


def test_the_trace_flag_picks_philly_from_the_flag_or_the_environment(bench, tmp_path, monkeypatch) -> None:
    path = write(tmp_path / "philly.csv", ROWS)
    options = bench.parse(["--trace", "philly", "--traces", str(path), "--quick"])
    assert options.trace == "philly" and options.limit == bench.QUICK_LIMIT
    assert len(bench.load_trace(options.trace, options.traces)) == len(ROWS)
    monkeypatch.setenv("FLEETLINE_PHILLY_TRACE", str(path))
    assert [job.job_id for job in bench.load_trace("philly", None)][-1] == "p5"
    assert bench.parse([]).trace == "itp"


def test_a_philly_case_guarantees_each_of_the_traces_teams_a_share_by_demand_and_replays(bench, tmp_path) -> None:
    trace = bench.load_philly(write(tmp_path / "jobs.csv", ROWS))
    options = bench.parse(["--trace", "philly", "--policy", "easy", "--policy", "fleetline"])
    case = bench.run_case(trace, 0.8, "30m", "2", ["easy", "fleetline"], options)
    assert {quota["team"] for quota in case["quotas"]} == {"a1", "b7", "c2"}
    by_team = {quota["team"]: quota["guaranteed"] for quota in case["quotas"]}
    assert by_team["b7"] > by_team["a1"] > 0  # b7 offers 14,520 GPU-s, a1 7,350
    assert case["jobs"] == len(ROWS)
    assert [result["policy"] for result in case["results"]] == ["easy", "fleetline"]
    assert all(result["jobs"] == len(ROWS) and result["jct_mean_s"] >= 60.0 for result in case["results"])


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([row[:4] + ("a1",) for row in ROWS], "1 team(s)"),
        ([], "0 jobs"),
    ],
)
def test_a_philly_file_with_fewer_than_two_teams_is_refused(bench, tmp_path, rows, message) -> None:
    with pytest.raises(SystemExit, match=message.replace("(", r"\(").replace(")", r"\)")):
        bench.load_philly(write(tmp_path / "jobs.csv", rows))


def test_a_missing_philly_file_is_named(bench, tmp_path) -> None:
    with pytest.raises(SystemExit, match="no Philly trace at .*nowhere.csv"):
        bench.load_philly(tmp_path / "nowhere.csv")


def test_a_malformed_philly_row_names_its_line_and_column(bench, tmp_path) -> None:
    from scheduling.sim.trace import TraceError

    with pytest.raises(TraceError, match=r"jobs.csv:3: column 'gpus': 'two' is not a number"):
        bench.load_philly(write(tmp_path / "jobs.csv", [ROWS[0], ("p9", 5, 10, "two", "a1")]))
