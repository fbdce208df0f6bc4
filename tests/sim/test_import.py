"""Trace importers, fleet shorthand and quota files: good input parses, bad input says where and why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduling.sim.fleet import SpecError, load_quotas, parse_fleet
from scheduling.sim.runner import check_quotas
from scheduling.sim.trace import TraceError, TraceJob, load_canonical, load_helios, load_itp
from scheduling.sim.workload import build_workload, parse_estimate

CANONICAL_HEADER = "job_id,submit_time,duration,gpus,team"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_canonical_rows_are_sorted_by_submit_time_with_optional_columns(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "t.csv",
        "job_id,submit_time,duration,gpus,team,time_limit,kind\nb,20,5,8,x,,\na,10,100,16,y,200,batch\n",
    )
    jobs = load_canonical([path])
    assert [(j.job_id, j.submit_s, j.gpus, j.team, j.time_limit_s, j.kind) for j in jobs] == [
        ("a", 10.0, 16, "y", 200.0, "batch"),
        ("b", 20.0, 8, "x", None, "training"),
    ]


@pytest.mark.parametrize(
    ("body", "line", "column", "message"),
    [
        (f"{CANONICAL_HEADER}\na,0,10,0,x\n", 2, "gpus", "0 is below the minimum 1"),
        (f"{CANONICAL_HEADER}\na,0,10,1,x\nb,0,-1,1,x\n", 3, "duration", "-1 is below the minimum 0"),
        (f"{CANONICAL_HEADER}\na,soon,10,1,x\n", 2, "submit_time", "'soon' is not a number"),
        (f"{CANONICAL_HEADER}\na,0,10,1.5,x\n", 2, "gpus", "'1.5' is not a whole number"),
        (f"{CANONICAL_HEADER}\na,0,10,1,\n", 2, "team", "is empty"),
        (f"{CANONICAL_HEADER}\na,0,10,1,x\na,1,10,1,x\n", 3, "job_id", "duplicate job id 'a' (first at {f}:2)"),
        (f"{CANONICAL_HEADER}\na,0,10,1\n", 2, None, "has 4 fields, the header has 5"),
        ("job_id,submit_time,duration,team\na,0,10,x\n", 1, "gpus", "required column is missing"),
        (f"{CANONICAL_HEADER},kind\na,0,10,1,x,gaming\n", 2, "kind", "'gaming' is not one of training, serving, batch"),
    ],
)
def test_malformed_canonical_traces_name_file_line_column_and_problem(tmp_path, body, line, column, message) -> None:
    path = write(tmp_path, "bad.csv", body)
    with pytest.raises(TraceError) as caught:
        load_canonical([path])
    error = caught.value
    assert (error.file, error.line, error.column) == (str(path), line, column)
    assert error.message.startswith(message.format(f=path))


@pytest.mark.parametrize(
    ("body", "column", "message"),
    [
        (f"{CANONICAL_HEADER}\na,0,1e308,1,x\n", "duration", "1e308 is above the maximum 31,536,000"),
        (f"{CANONICAL_HEADER}\na,0,1e400,1,x\n", "duration", "'1e400' is not a finite number"),
        (f"{CANONICAL_HEADER}\na,0,nan,1,x\n", "duration", "'nan' is not a finite number"),
        (f"{CANONICAL_HEADER}\na,1e308,10,1,x\n", "submit_time", "1e308 is above the maximum 315,360,000"),
        (
            f"{CANONICAL_HEADER}\na,0,10,100000000000000000000,x\n",
            "gpus",
            "100000000000000000000 is above the maximum 65,536",
        ),
        (
            f"{CANONICAL_HEADER},max_gpus\na,0,10,8,x,1000000000000\n",
            "max_gpus",
            "1000000000000 is above the maximum 65,536",
        ),
        (f"{CANONICAL_HEADER},time_limit\na,0,10,8,x,1e308\n", "time_limit", "1e308 is above the maximum 31,536,000"),
        (f"{CANONICAL_HEADER},checkpoint_interval\na,0,10,8,x,inf\n", "checkpoint_interval", "'inf' is not a finite"),
        (
            f"{CANONICAL_HEADER},checkpoint_gb\na,0,10,8,x,1e308\n",
            "checkpoint_gb",
            "1e308 is above the maximum 1,000,000",
        ),
        (
            f"{CANONICAL_HEADER},priority\na,0,10,8,x,10000000000\n",
            "priority",
            "10000000000 is above the maximum 1,000,000",
        ),
    ],
)
def test_huge_and_non_finite_numbers_in_a_trace_are_refused_naming_the_row_and_field(
    tmp_path, body, column, message
) -> None:
    path = write(tmp_path, "huge.csv", body)
    with pytest.raises(TraceError) as caught:
        load_canonical([path])
    assert (caught.value.line, caught.value.column) == (2, column)
    assert caught.value.message.startswith(message)


def test_huge_numbers_in_itp_and_helios_traces_are_refused_too(tmp_path: Path) -> None:
    itp = write(tmp_path, "c.csv", "job_id,submission_time,duration,num_gpu\nu1,5,600,1\nu2,6,1e308,1\n")
    with pytest.raises(TraceError) as caught:
        load_itp([itp])
    assert (caught.value.line, caught.value.column) == (3, "duration")

    helios = write(
        tmp_path,
        "cluster_log.csv",
        HELIOS_HEADER
        + "j1,u,vc,1,4,1,COMPLETED,2020-04-01 00:00:00,,,30,0\n"
        + "j2,u,vc,1,4,1,COMPLETED,2020-04-01 00:00:10,2020-04-01 00:00:10,3020-04-01 00:00:10,,0\n",
    )
    with pytest.raises(TraceError) as caught:
        load_helios([helios])
    assert (caught.value.line, caught.value.column) == (3, "duration")
    assert "above the maximum 31,536,000" in caught.value.message


def test_a_helios_submission_centuries_after_the_first_is_refused_naming_its_row(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "cluster_log.csv",
        HELIOS_HEADER
        + "j1,u,vc,1,4,1,COMPLETED,2020-04-01 00:00:00,,,30,0\n"
        + "j2,u,vc,1,4,1,COMPLETED,9999-04-01 00:00:00,,,30,0\n",
    )
    with pytest.raises(TraceError) as caught:
        load_helios([path])
    assert (caught.value.file, caught.value.line, caught.value.column) == (str(path), 3, "submit_time")
    assert "above the maximum 315,360,000" in caught.value.message


def test_errors_can_be_collected_up_to_a_limit(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.csv", f"{CANONICAL_HEADER}\na,0,10,0,x\nb,0,x,1,x\nc,0,1,1,x\n")
    with pytest.raises(TraceError) as caught:
        load_canonical([path], max_errors=10)
    assert [(e.line, e.column) for e in caught.value.errors] == [(2, "gpus"), (3, "duration")]
    assert str(caught.value) == f"{path}:2: column 'gpus': 0 is below the minimum 1"


def test_itp_files_are_one_team_each_named_by_the_file_stem(tmp_path: Path) -> None:
    header = "job_id,submission_time,duration,num_gpu\n"
    one = write(tmp_path, "cluster01.csv", header + "u1,50,600,8\n")
    two = write(tmp_path, "cluster02.csv", header + "u1,10,700,1\n")
    jobs = load_itp([one, two])
    assert [(j.job_id, j.team, j.submit_s) for j in jobs] == [
        ("cluster02:u1", "cluster02", 10.0),
        ("cluster01:u1", "cluster01", 50.0),
    ]


def test_a_malformed_itp_file_names_its_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, "c.csv", "job_id,submission_time,duration,num_gpu\nu1,5,600,1\nu2,6,600,-2\n")
    with pytest.raises(TraceError) as caught:
        load_itp([path])
    assert (caught.value.line, caught.value.column, caught.value.message) == (3, "num_gpu", "-2 is below the minimum 1")


HELIOS_HEADER = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"


def test_helios_dates_become_seconds_from_the_first_submission_and_cpu_jobs_are_skipped(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "cluster_log.csv",
        HELIOS_HEADER
        + "j2,u,vcA,8,4,1,COMPLETED,2020-04-01 00:01:40,2020-04-01 00:02:00,2020-04-01 00:12:00,600,0\n"
        + "j1,u,vcB,1,4,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:00:00,2020-04-01 00:00:30,30,0\n"
        + "j3,u,vcA,0,4,1,COMPLETED,2020-04-01 00:00:10,2020-04-01 00:00:10,2020-04-01 00:00:20,10,0\n",
    )
    jobs = load_helios([path])
    assert [(j.job_id, j.team, j.submit_s, j.gpus, j.duration_s) for j in jobs] == [
        ("j1", "vcB", 0.0, 1, 30.0),
        ("j2", "vcA", 100.0, 8, 600.0),
    ]


def test_a_helios_time_that_is_not_a_date_names_its_place(tmp_path: Path) -> None:
    path = write(tmp_path, "cluster_log.csv", HELIOS_HEADER + "j1,u,vc,1,4,1,COMPLETED,yesterday,,,30,0\n")
    with pytest.raises(TraceError) as caught:
        load_helios([path])
    assert (caught.value.line, caught.value.column) == (2, "submit_time")
    assert caught.value.message == "'yesterday' is neither seconds nor a date-time"


@pytest.mark.parametrize(
    ("spec", "capacity", "nodes", "accelerator"),
    [("2x8x10x8", 1280, 160, "gpu"), ("1x2x4x8:h100", 64, 8, "h100"), ("1x1x1x4", 4, 1, "gpu")],
)
def test_the_fleet_shorthand_is_pods_racks_nodes_gpus(spec, capacity, nodes, accelerator) -> None:
    fleet = parse_fleet(spec)
    assert (fleet.capacity_gpus, len(fleet.nodes()), fleet.accelerators) == (capacity, nodes, (accelerator,))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("2x8x10", "neither PODSxRACKSxNODESxGPUS"),
        ("0x8x10x8", "pods must be a positive whole number, got 0"),
        ("big", "neither PODSxRACKSxNODESxGPUS"),
    ],
)
def test_bad_fleet_shorthands_are_rejected_clearly(spec, message) -> None:
    with pytest.raises(SpecError, match=message):
        parse_fleet(spec)


def test_a_json_fleet_may_mix_accelerators_in_groups(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "fleet.json",
        json.dumps(
            {
                "groups": [
                    {"pods": 1, "racks": 2, "nodes": 2, "accelerator": "a100"},
                    {"pods": 1, "racks": 1, "nodes": 2, "gpus": 4, "accelerator": "l4"},
                ]
            }
        ),
    )
    fleet = parse_fleet(str(path))
    assert (fleet.capacity_of("a100"), fleet.capacity_of("l4"), fleet.gpus_per_node("l4")) == (32, 8, 4)
    assert len({node.pod for node in fleet.nodes()}) == 2


def test_a_json_fleet_with_an_unknown_key_is_rejected(tmp_path: Path) -> None:
    path = write(tmp_path, "fleet.json", json.dumps({"pods": 1, "racks": 1, "nodes": 1, "gpu": 8}))
    with pytest.raises(SpecError, match="group 0: unknown key 'gpu'"):
        parse_fleet(str(path))


def test_quota_files_parse_from_csv_and_json(tmp_path: Path) -> None:
    csv_path = write(tmp_path, "q.csv", "team,guaranteed,borrow_limit,lend_limit\na,8,16,\nb,4,0,2\n")
    spec = load_quotas(csv_path)
    assert [(q.team, q.guaranteed, q.borrow_limit, q.lend_limit) for q in spec.quotas] == [
        ("a", 8, 16, None),
        ("b", 4, 0, 2),
    ]
    json_path = write(
        tmp_path, "q.json", json.dumps([{"team": "a", "guaranteed": 8, "borrow_limit": 0, "accelerator": "h100"}])
    )
    assert load_quotas(json_path).quotas[0].accelerator == "h100"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("team,guaranteed\na,8\n", "column 'borrow_limit': required column is missing"),
        ("team,guaranteed,borrow_limit\na,-1,0\n", "q.csv:2: column 'guaranteed': -1 must not be negative"),
        ("team,guaranteed,borrow_limit\na,lots,0\n", "column 'guaranteed': 'lots' is not a whole number"),
        ("team,guaranteed,borrow_limit\na,1,0\na,2,0\n", "team 'a' has a second quota"),
    ],
)
def test_bad_quota_files_are_rejected_clearly(tmp_path, body, message) -> None:
    with pytest.raises(SpecError, match=message):
        load_quotas(write(tmp_path, "q.csv", body))


def test_guarantees_beyond_the_fleet_are_refused(tmp_path: Path) -> None:
    spec = load_quotas(write(tmp_path, "q.csv", "team,guaranteed,borrow_limit\na,40,0\nb,40,0\n"))
    with pytest.raises(SpecError, match="guarantee 80 GPUs of 'gpu' but the fleet has 64"):
        check_quotas(parse_fleet("1x2x4x8"), spec)


def test_gangs_round_up_to_whole_nodes_and_impossible_jobs_are_dropped() -> None:
    trace = [TraceJob("a", 0, 10, 12, "x"), TraceJob("b", 0, 10, 4, "x"), TraceJob("c", 0, 10, 128, "x")]
    workload = build_workload(trace, parse_fleet("1x2x4x8"), estimate=2.0)
    assert [(j.id, j.gpus, j.time_limit_s) for j in workload.jobs] == [("a", 16, 20.0), ("b", 4, 20.0)]
    assert (workload.rounded, workload.dropped, workload.dropped_reasons) == (1, 1, (("larger-than-fleet", 1),))


@pytest.mark.parametrize(("text", "expected"), [("exact", None), ("2.0", 2.0), ("1", 1.0)])
def test_estimates_are_exact_or_a_factor(text, expected) -> None:
    assert parse_estimate(text) == expected


@pytest.mark.parametrize("text", ["0.5", "soon"])
def test_bad_estimates_are_rejected(text) -> None:
    with pytest.raises(ValueError):
        parse_estimate(text)
