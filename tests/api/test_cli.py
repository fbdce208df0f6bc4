"""The ``fleetline`` command line against a live test server: submit, queue, jobs, show, cancel,
quota, request-quota and usage, tables and --json, and the exit codes scripts rely on."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from api import cli
from api.services import api_token_create
from scheduling.fleet_calendar import fleet_today
from scheduling.models import Job
from tenants.models import AuditEvent, Quota, QuotaRequest
from tests.api.conftest import People


class Run:
    def __init__(self, url: str, token: str) -> None:
        self.environ = {"FLEETLINE_URL": url, "FLEETLINE_TOKEN": token}

    def __call__(self, *argv: str, **environ: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = cli.main(list(argv), out=out, err=err, environ={**self.environ, **environ})
        return code, out.getvalue(), err.getvalue()

    def json(self, *argv: str) -> Any:
        code, out, err = self("--json", *argv)
        assert code == cli.EXIT_OK, err
        return json.loads(out)


@pytest.fixture
def as_lead(people: People, live_server: Any) -> Run:
    return Run(live_server.url, api_token_create(user=people.lead, name="cli").secret)


@pytest.fixture
def as_outsider(people: People, live_server: Any) -> Run:
    return Run(live_server.url, api_token_create(user=people.outsider, name="cli").secret)


def test_submit_then_queue_jobs_show_and_cancel(people: People, as_lead: Run) -> None:
    code, out, err = as_lead(
        "submit", "--team", "language-models", "--name", "sweep", "--gpus", "16", "--duration", "2h"
    )
    assert (code, err) == (0, "")
    job = Job.objects.get(name="sweep")
    assert f"Submitted job {job.pk} (sweep), pending." in out
    assert job.duration_s == 7200

    code, queue, _ = as_lead("queue")
    assert code == 0
    assert queue.splitlines()[0].split() == ["JOBID", "NAME", "TEAM", "GPUS", "ACCEL", "PRIORITY", "REASON", "START"]
    assert str(job.pk) in queue and "new" in queue

    assert [row["id"] for row in as_lead.json("jobs", "--state", "pending")] == [job.pk]
    shown = as_lead.json("show", str(job.pk))
    assert (shown["name"], shown["events"][0]["kind"]) == ("sweep", "submitted")

    code, out, _ = as_lead("cancel", str(job.pk))
    assert (code, out) == (0, f"Cancelled job {job.pk} (sweep).\n")
    code, _, err = as_lead("cancel", str(job.pk))
    assert code == cli.EXIT_INVALID and "already ended" in err


def test_the_queue_says_why_a_job_waits_and_when_it_should_start(people: People, as_lead: Run) -> None:
    people.fleet.submit(gpus=32, name="fills-the-fleet", time_limit_s=3600.0)
    people.fleet.tick()
    waiting = people.fleet.submit(gpus=8, name="waits")
    people.fleet.tick()

    rows = as_lead.json("queue")
    code, table, _ = as_lead("queue")
    shown = as_lead("show", str(waiting.pk))[1]

    assert [row["id"] for row in rows] == [waiting.pk]
    reason = rows[0]["pending"]["reason"]
    assert reason not in ("", "new")
    line = next(line for line in table.splitlines() if line.startswith(str(waiting.pk)))
    assert reason in line
    assert "in " in line or (rows[0]["pending"]["waits_for"] or "") in line
    assert f"waits because: {rows[0]['pending']['explanation']}" in shown
    assert "8 more H100 GPUs must free up" in shown


def test_an_invalid_submission_names_the_field_and_exits_7(as_lead: Run) -> None:
    code, _, err = as_lead("submit", "--team", "language-models", "--name", "x", "--gpus", "12", "--duration", "1h")

    assert code == cli.EXIT_INVALID
    assert "gpus: Multi-node gangs take whole nodes" in err
    assert not Job.objects.exists()


def test_a_gang_no_node_can_hold_is_refused_with_what_fits_and_exits_7(as_lead: Run) -> None:
    code, _, err = as_lead(
        "submit", "--team", "language-models", "--name", "x", "--gpus", "16", "--duration", "1h",
        "--required-level", "node",
    )  # fmt: skip

    assert code == cli.EXIT_INVALID
    assert (
        "gpus: On H100 a gang that must fit within one node can have at most 8 GPUs; within one rack at most 16" in err
    )
    assert not Job.objects.exists()


def test_quota_request_quota_and_usage(people: People, as_lead: Run, live_server: Any) -> None:
    code, table, _ = as_lead("quota")
    assert code == 0 and "language-models  H100" in table

    code, out, _ = as_lead(
        "request-quota", "--team", "language-models", "--accelerator", "H100", "--guaranteed", "24",
        "--justification", "A bigger sweep.",
    )  # fmt: skip
    assert code == 0 and "Requested 24 guaranteed H100 GPUs" in out
    assert QuotaRequest.objects.get().guaranteed == 24

    today = fleet_today().isoformat()
    code, table, _ = as_lead("usage", "--start", today, "--end", today)
    assert code == 0 and table.startswith("TEAM")
    member = Run(live_server.url, api_token_create(user=people.member, name="cli").secret)
    code, _, err = member("usage", "--start", today, "--end", today)
    assert code == cli.EXIT_NOT_FOUND
    finance = Run(live_server.url, api_token_create(user=people.finance, name="cli").secret)
    assert finance.json("usage", "--start", today, "--end", today)["fleet"]["capacity_gpu_h"] >= 0


def test_other_teams_jobs_are_not_found(people: People, as_outsider: Run) -> None:
    job = people.fleet.submit(gpus=8)

    code, _, err = as_outsider("show", str(job.pk))

    assert code == cli.EXIT_NOT_FOUND
    assert as_outsider.json("jobs") == []


def test_a_bad_token_exits_4_and_says_where_to_make_one(as_lead: Run, live_server: Any) -> None:
    code, _, err = as_lead("jobs", FLEETLINE_TOKEN="fl_revoked-or-wrong")

    assert code == cli.EXIT_AUTH
    assert f"{live_server.url}/settings/tokens/" in err


def test_a_wrong_url_exits_3_whether_nothing_or_something_else_answers(as_lead: Run, live_server: Any) -> None:
    code, _, err = as_lead("jobs", FLEETLINE_URL="http://127.0.0.1:9")
    assert code == cli.EXIT_UNREACHABLE and "Cannot reach Fleetline" in err

    code, _, err = as_lead("jobs", FLEETLINE_URL=f"{live_server.url}/login")
    assert code == cli.EXIT_UNREACHABLE and "check the URL" in err


def test_settings_come_from_a_config_file_when_the_environment_has_none(as_lead: Run, tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'url = "{as_lead.environ["FLEETLINE_URL"]}"\ntoken = "{as_lead.environ["FLEETLINE_TOKEN"]}"\n')
    out, err = io.StringIO(), io.StringIO()

    code = cli.main(["jobs", "--json"], out=out, err=err, environ={"FLEETLINE_CONFIG": str(config)})

    assert (code, json.loads(out.getvalue())) == (0, [])


def test_missing_settings_or_bad_arguments_exit_2(db: None) -> None:
    assert cli.main(["jobs"], out=io.StringIO(), err=io.StringIO(), environ={"FLEETLINE_CONFIG": "/nonexistent"}) == 2
    assert cli.main(["submit", "--gpus", "many"], out=io.StringIO(), err=io.StringIO(), environ={}) == 2


def test_the_console_script_runs_without_django() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "api.cli", "jobs", "--url", "http://127.0.0.1:9", "--token", "t"],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": "/usr/bin:/bin"},
        cwd=Path(__file__).resolve().parents[2],
    )

    assert result.returncode == cli.EXIT_UNREACHABLE, result.stderr


def test_a_fleet_admin_sets_a_quota_by_team_and_accelerator_name(people: People, live_server: Any) -> None:
    as_admin = Run(live_server.url, api_token_create(user=people.admin, name="cli").secret)

    code, out, err = as_admin(
        "quota-set", "language-models", "H100", "--guaranteed", "20", "--lend-limit", "4", "--reason", "Launch."
    )

    assert (code, err) == (0, "")
    assert out == (
        "Set the H100 quota of language-models: 20 guaranteed, borrow limit unlimited, lend limit 4 "
        "(in use 0 of 32 in the fleet).\n"
    )
    quota = Quota.objects.get(team=people.fleet.team, accelerator_type=people.fleet.accelerator)
    assert (quota.guaranteed, quota.borrow_limit, quota.lend_limit) == (20, None, 4)
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.QUOTA_SET)
    assert (event.actor, event.after) == (people.admin, {"guaranteed": 20, "borrow_limit": None, "lend_limit": 4})
    assert event.object_repr.endswith("quota: Launch.")
    answer = as_admin.json("quota-set", "language-models", "H100", "--guaranteed", "8", "--borrow-limit", "16",
                           "--lend-limit", "unlimited", "--reason", "Back.")  # fmt: skip
    assert (answer["guaranteed"], answer["borrow_limit"], answer["lend_limit"]) == (8, 16, None)


def test_quota_set_refusals_have_their_exit_codes_and_change_nothing(
    people: People, as_lead: Run, live_server: Any
) -> None:
    as_admin = Run(live_server.url, api_token_create(user=people.admin, name="cli").secret)
    before = list(Quota.objects.values_list("guaranteed", "borrow_limit", "lend_limit"))

    code, _, err = as_lead("quota-set", "language-models", "H100", "--guaranteed", "20", "--reason", "Mine.")
    assert code == cli.EXIT_REFUSED and "Only fleet admins set quotas." in err
    code, _, err = as_admin("quota-set", "language-models", "H100", "--guaranteed", "100000", "--reason", "Huge.")
    assert code == cli.EXIT_INVALID
    assert (
        err
        == "fleetline: Refused (HTTP 400): Guarantees for H100 would total 100000 of 32 GPUs (overcommit ratio 1).\n"
    )
    code, _, err = as_admin("quota-set", "language-models", "TPUv9", "--guaranteed", "8", "--reason", "New.")
    assert code == cli.EXIT_NOT_FOUND and "No such accelerator type." in err
    code, _, err = as_admin("quota-set", "no-such-team", "H100", "--guaranteed", "8", "--reason", "New.")
    assert code == cli.EXIT_NOT_FOUND
    for bad in (["--guaranteed", "-1"], ["--guaranteed", "8", "--borrow-limit", "lots"], ["--guaranteed", "8"]):
        code, _, err = as_admin(
            "quota-set", "language-models", "H100", *bad, *(["--reason", "x"] if len(bad) > 2 else [])
        )
        assert code == cli.EXIT_USAGE, bad

    assert list(Quota.objects.values_list("guaranteed", "borrow_limit", "lend_limit")) == before
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.QUOTA_SET).exists()
