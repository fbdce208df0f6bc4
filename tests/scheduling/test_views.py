"""Job pages and the fleet map: the member / outsider / admin trio, validation, cancel."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from scheduling.cycle.snapshot import snapshot_build
from scheduling.fleet_calendar import fleet_datetime
from scheduling.models import Job, Node, SchedulerEvent
from tenants.roles import FLEET_ADMIN
from tests.factories import MembershipFactory, TeamFactory, UserFactory
from tests.scheduling.conftest import Fleet


@pytest.fixture
def member(fleet: Fleet) -> Client:
    client = Client()
    client.force_login(MembershipFactory(team=fleet.team).user)
    return client


@pytest.fixture
def outsider(fleet: Fleet) -> Client:
    client = Client()
    client.force_login(MembershipFactory(team=TeamFactory(name="Other", slug="other")).user)
    return client


@pytest.fixture
def admin(fleet: Fleet) -> Client:
    user = UserFactory()
    user.groups.add(Group.objects.get_or_create(name=FLEET_ADMIN)[0])
    client = Client()
    client.force_login(user)
    return client


def _form(fleet: Fleet, **overrides: object) -> dict[str, object]:
    data: dict[str, object] = {
        "team": fleet.team.pk,
        "name": "finetune-llm",
        "kind": "training",
        "priority_class": fleet.training.pk,
        "accelerator_type": fleet.accelerator.pk,
        "gpus": 16,
        "duration_h": 2,
        "time_limit_h": 3,
        "checkpoint_interval_min": 30,
        "checkpoint_gb": 40,
    }
    data.update(overrides)
    return data


def test_a_member_submits_a_job_from_the_browser_form(fleet: Fleet, member: Client) -> None:
    response = member.post("/jobs/new/", _form(fleet))

    job = Job.objects.get(name="finetune-llm")
    assert response.status_code == 302
    assert response["Location"] == f"/jobs/{job.pk}/"
    assert (job.gpus, job.duration_s, job.time_limit_s, job.checkpoint_interval_s) == (16, 7200, 10800, 1800)
    assert SchedulerEvent.objects.filter(job=job, kind=SchedulerEvent.Kind.SUBMITTED).exists()


def test_a_job_that_checkpoints_when_preempted_says_so_to_the_engine(fleet: Fleet, member: Client) -> None:
    member.post("/jobs/new/", _form(fleet, checkpoint_on_preempt="on"))
    member.post("/jobs/new/", _form(fleet, name="no-signal-handler"))

    loaded = snapshot_build(sim_now_s=0.0)
    flags = {job_id: job.checkpoint_on_preempt for job_id, job in loaded.state.pending.items()}
    by_name = dict(Job.objects.values_list("name", "pk"))
    assert flags == {str(by_name["finetune-llm"]): True, str(by_name["no-signal-handler"]): False}


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"gpus": 12}, "gpus", "multiple of 8"),
        ({"gpus": 64}, "gpus", "only 32 H100 GPUs"),
        ({"gpus": 0}, "gpus", "greater than or equal to 1"),
        ({"duration_h": 0}, "duration_h", "greater than or equal to 0.01"),
        ({"min_gpus": 20}, "min_gpus", "between 1 and the gang size"),
        ({"max_gpus": 8}, "max_gpus", "cannot be below the gang size"),
        ({"kind": "serving"}, "priority_class", "is for training jobs"),
        ({"name": "   "}, "name", "required"),
    ],
)
def test_the_submit_form_rejects_bad_input_with_a_clear_message_and_saves_nothing(
    fleet: Fleet, member: Client, overrides: dict[str, object], field: str, message: str
) -> None:
    response = member.post("/jobs/new/", _form(fleet, **overrides))

    assert response.status_code == 200
    assert message in " ".join(response.context["form"].errors[field])
    assert not Job.objects.exists()


# The fleet: one pod of two racks of two 8-GPU nodes.
@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"gpus": 16, "required_level": "node"},
            "On H100 a gang that must fit within one node can have at most 8 GPUs;"
            " within one rack at most 16; within one pod at most 32.",
        ),
        (
            {"gpus": 24, "required_level": "rack"},
            "On H100 a gang that must fit within one rack can have at most 16 GPUs; within one pod at most 32.",
        ),
        (
            {"gpus": 16, "min_gpus": 16, "max_gpus": 16, "required_level": "node"},
            "within one node can have at most 8 GPUs",
        ),
        (
            {"gpus": 32, "min_gpus": 24, "max_gpus": 32, "required_level": "rack"},
            "within one rack can have at most 16 GPUs; within one pod at most 32."
            " An elastic job must fit at its minimum size.",
        ),
    ],
)
def test_the_submit_form_refuses_a_gang_no_healthy_fleet_of_this_shape_could_hold_and_says_what_fits(
    fleet: Fleet, member: Client, overrides: dict[str, object], message: str
) -> None:
    response = member.post("/jobs/new/", _form(fleet, **overrides))

    assert response.status_code == 200
    assert message in " ".join(response.context["form"].errors["gpus"])
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    "overrides",
    [
        {"gpus": 8, "required_level": "node"},
        {"gpus": 16, "required_level": "rack"},
        {"gpus": 32, "required_level": "pod"},
        # Elastic: it can start at 8 GPUs on one node, and grow wider when it may.
        {"gpus": 16, "min_gpus": 8, "max_gpus": 16, "required_level": "node"},
        {"gpus": 32, "min_gpus": 16, "max_gpus": 32, "required_level": "rack"},
    ],
)
def test_the_submit_form_takes_a_gang_that_fits_within_its_required_level(
    fleet: Fleet, member: Client, overrides: dict[str, object]
) -> None:
    response = member.post("/jobs/new/", _form(fleet, **overrides))

    assert response.status_code == 302, response.context["form"].errors
    assert Job.objects.get().gpus == overrides["gpus"]


def test_an_elastic_gang_larger_than_its_required_domain_starts_at_a_size_that_fits(fleet: Fleet) -> None:
    job = fleet.submit(gpus=16, min_gpus=8, max_gpus=16, required_level="node")
    fleet.tick()

    job.refresh_from_db()
    assert job.state == Job.State.RUNNING
    assert [allocation.gpus for allocation in job.allocations.all()] == [8]


def test_a_gang_that_fits_a_healthy_fleet_is_taken_while_nodes_are_down(fleet: Fleet, member: Client) -> None:
    Node.objects.filter(name__endswith="-n2").update(state=Node.State.DOWN, healthy_gpus=0)

    response = member.post("/jobs/new/", _form(fleet, gpus=16, required_level="rack"))

    assert response.status_code == 302
    assert Job.objects.get().required_level == "rack"


def test_a_member_cannot_submit_for_a_team_they_are_not_in(fleet: Fleet, outsider: Client) -> None:
    response = outsider.post("/jobs/new/", _form(fleet))

    assert response.status_code == 200
    assert "team" in response.context["form"].errors
    assert not Job.objects.exists()


def test_the_job_list_shows_the_teams_jobs_with_reason_and_start_estimate(fleet: Fleet, member: Client) -> None:
    fleet.submit(gpus=32, duration_s=600.0, time_limit_s=600.0, name="big")
    fleet.tick()
    fleet.submit(gpus=16, name="waiting")
    fleet.tick()

    html = member.get("/jobs/").content.decode()

    assert "big" in html and "waiting" in html
    assert "in 10m" in html or "in 9m" in html


def test_an_outsider_sees_neither_the_job_in_lists_nor_its_page(fleet: Fleet, outsider: Client) -> None:
    job = fleet.submit(gpus=8, name="secret-run")

    assert "secret-run" not in outsider.get("/jobs/").content.decode()
    assert outsider.get(f"/jobs/{job.pk}/").status_code == 404
    assert outsider.post(f"/jobs/{job.pk}/cancel/").status_code == 404
    job.refresh_from_db()
    assert job.state == Job.State.PENDING


def test_an_admin_sees_every_teams_jobs(fleet: Fleet, admin: Client) -> None:
    job = fleet.submit(gpus=8, name="any-team-run")

    assert "any-team-run" in admin.get("/jobs/").content.decode()
    assert admin.get(f"/jobs/{job.pk}/").status_code == 200


def test_a_member_cancels_a_running_job_and_its_gpus_are_freed(fleet: Fleet, member: Client) -> None:
    job = fleet.submit(gpus=16)
    fleet.tick()

    response = member.post(f"/jobs/{job.pk}/cancel/")

    job.refresh_from_db()
    assert response.status_code == 302
    assert job.state == Job.State.CANCELLED
    assert not job.allocations.exists()
    assert sum(node.allocated_gpus for node in type(fleet.nodes[0]).objects.all()) == 0


def test_the_job_page_shows_its_history(fleet: Fleet, member: Client) -> None:
    job = fleet.submit(gpus=8, name="history")
    fleet.tick()

    html = member.get(f"/jobs/{job.pk}/").content.decode()

    assert "Submitted" in html and "Started on 1 node" in html


def test_the_fleet_map_shows_every_node_with_its_occupancy(fleet: Fleet, member: Client) -> None:
    fleet.submit(gpus=8, name="mapped")
    fleet.tick()

    html = member.get("/fleet/").content.decode()

    assert html.count('class="node ') == 4
    assert "mapped (8)" in html


def test_pages_require_login(fleet: Fleet) -> None:
    for url in ("/jobs/", "/jobs/new/", "/fleet/"):
        assert Client().get(url).status_code == 302


def test_the_team_page_shows_usage_and_each_pending_job_with_its_reason(fleet: Fleet, member: Client) -> None:
    fleet.submit(gpus=32, duration_s=600.0, time_limit_s=600.0, name="big")
    fleet.tick()
    fleet.submit(gpus=16, name="queued-run")
    fleet.tick()

    response = member.get(f"/teams/{fleet.team.slug}/")

    row = next(r for r in response.context["quotas"] if r.accelerator_type == "H100")
    assert (row.guaranteed, row.in_use, row.borrowed) == (16, 32, 16)
    html = response.content.decode()
    assert "queued-run" in html
    assert "in 10m" in html or "in 9m" in html


def test_the_job_pages_live_part_follows_the_job_and_hides_cancel_once_it_ends(fleet: Fleet, member: Client) -> None:
    job = fleet.submit(gpus=8, duration_s=600.0, name="short")
    fleet.tick()

    running = member.get(f"/jobs/{job.pk}/live/").content.decode()
    assert 'id="job-state">Running' in running
    assert "Started" in running and "Cancel job" in running
    assert "<html" not in running  # the part alone, for the page to swap in

    for _ in range(3):
        fleet.tick(5.0)
    ended = member.get(f"/jobs/{job.pk}/live/").content.decode()
    assert 'id="job-state">Completed' in ended
    assert "Cancel job" not in ended and "Estimated start" not in ended and "Ended" in ended


def test_an_outsider_cannot_read_another_teams_job_part(fleet: Fleet, outsider: Client) -> None:
    job = fleet.submit(gpus=8)
    assert outsider.get(f"/jobs/{job.pk}/live/").status_code == 404


def test_only_a_large_jobs_cancel_button_asks_for_confirmation(fleet: Fleet, member: Client) -> None:
    small, large = fleet.submit(gpus=8), fleet.submit(gpus=16, name="large")
    assert "data-confirm" not in member.get(f"/jobs/{small.pk}/").content.decode()
    assert "16-GPU gang" in member.get(f"/jobs/{large.pk}/").content.decode()


def test_cancelling_a_pending_job_warns_of_its_place_in_the_queue_not_of_gpus_it_holds(
    fleet: Fleet, member: Client
) -> None:
    running = fleet.submit(gpus=16, name="large")
    fleet.tick()
    pending = fleet.submit(gpus=32, name="waits-for-the-fleet")
    assert pending.state == Job.State.PENDING

    waiting = member.get(f"/jobs/{pending.pk}/").content.decode()
    assert "It gives up its place in the queue for a 32-GPU gang." in waiting
    assert "holds" not in waiting.split('data-confirm="', 1)[1].split('"', 1)[0]
    held = member.get(f"/jobs/{running.pk}/").content.decode()
    assert "It holds a 16-GPU gang; work since its last checkpoint is lost." in held


def test_the_job_list_shows_submitter_and_times_and_searches_by_name_or_number(fleet: Fleet, member: Client) -> None:
    alpha, beta = fleet.submit(gpus=8, name="alpha-run"), fleet.submit(gpus=32, name="beta-run")
    fleet.tick()

    page = member.get("/jobs/").content.decode()
    assert "Submitted by" in page and "started 20" in page and "When (fleet time)" in page and "elapsed" in page

    found = member.get("/jobs/", {"q": "alpha"}).content.decode()
    assert "alpha-run" in found and "beta-run" not in found
    by_number = member.get("/jobs/", {"q": f"#{beta.pk}"}).content.decode()
    assert "beta-run" in by_number and "alpha-run" not in by_number
    assert alpha.pk != beta.pk


def test_the_job_list_takes_the_apis_filters_and_sorts(fleet: Fleet, member: Client) -> None:
    fleet.submit(gpus=8, name="small-train")
    fleet.submit(gpus=8, name="serve-one", kind="serving", priority_class_id=fleet.serving.pk)

    serving_only = member.get("/jobs/", {"kind": "serving"}).content.decode()
    assert "serve-one" in serving_only and "small-train" not in serving_only
    by_name = member.get("/jobs/", {"sort": "name", "part": "rows"}).content.decode()
    assert by_name.index("serve-one") < by_name.index("small-train")
    by_name_desc = member.get("/jobs/", {"sort": "-name", "part": "rows"}).content.decode()
    assert by_name_desc.index("small-train") < by_name_desc.index("serve-one")
    assert member.get("/jobs/", {"sort": "password"}).status_code == 200  # unknown sorts fall back
    refused = member.get("/jobs/", {"kind": "nonsense", "sort": "name"}).content.decode()
    assert 'class="error">kind: Select a valid choice.' in refused and "small-train" not in refused


def test_the_job_list_exports_the_filtered_history_as_csv(fleet: Fleet, member: Client, outsider: Client) -> None:
    fleet.submit(gpus=8, name="kept")
    fleet.submit(gpus=8, name="other", kind="serving", priority_class_id=fleet.serving.pk)

    response = member.get("/jobs/", {"show": "all", "kind": "training", "format": "csv"})
    body = b"".join(response.streaming_content).decode()
    assert response["Content-Type"] == "text/csv"
    assert body.splitlines()[0].startswith("Job,Name,Team,Team slug,Submitted by")
    assert "kept" in body and "other" not in body
    outsider_body = b"".join(outsider.get("/jobs/", {"show": "all", "format": "csv"}).streaming_content).decode()
    assert "kept" not in outsider_body


def test_the_job_list_csv_writes_a_name_like_a_formula_as_text(fleet: Fleet, member: Client) -> None:
    fleet.submit(gpus=8, name='=HYPERLINK("http://evil.example","click")')
    fleet.submit(gpus=8, name="@SUM(1+1)")

    response = member.get("/jobs/", {"show": "all", "format": "csv"})
    lines = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))

    assert sorted(line[1] for line in lines[1:]) == ['\'=HYPERLINK("http://evil.example","click")', "'@SUM(1+1)"]
    assert all(line[8] == "8" for line in lines[1:])  # numbers stay numbers


def test_the_job_list_csv_speaks_team_names_fleet_calendar_times_and_hours(fleet: Fleet, member: Client) -> None:
    job = fleet.submit(gpus=8, name="read-me", duration_s=5400.0, time_limit_s=7200.0)
    fleet.tick()
    job.refresh_from_db()

    response = member.get("/jobs/", {"show": "all", "format": "csv"})
    header, line = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    row = dict(zip(header, line, strict=True))

    assert row["Team"] == "Language Models" and row["Team slug"] == "language-models"
    assert row["Work at full size (h)"] == "1.50" and row["Time limit (h)"] == "2.00"
    submitted = fleet_datetime(job.submit_s)
    assert row["Submitted (fleet time)"] == f"{submitted:%Y-%m-%d %H:%M:%S}"
    assert row["Started (fleet time)"] == f"{fleet_datetime(job.started_s):%Y-%m-%d %H:%M:%S}"
    assert row["Finished (fleet time)"] == ""
    assert not any(name.endswith("_s") for name in header)


def test_someone_in_no_team_sees_no_submit_button_on_the_job_list(fleet: Fleet) -> None:
    client = Client()
    client.force_login(UserFactory())
    page = client.get("/jobs/").content.decode()
    assert "Submit a job" not in page and "No jobs here yet" not in page
    assert "you are in none" in page


def test_the_submit_form_defaults_to_a_class_of_the_default_kind_and_the_teams_accelerator(
    fleet: Fleet, member: Client
) -> None:
    from tests.factories import AcceleratorTypeFactory

    AcceleratorTypeFactory(name="A100")  # first by name, but the team has no quota for it
    form = member.get("/jobs/new/").context["form"]

    assert form["kind"].value() == "training"
    assert form["priority_class"].value() == fleet.training.pk
    assert form["accelerator_type"].value() == fleet.accelerator.pk
    page = member.get("/jobs/new/").content.decode()
    assert f'value="{fleet.serving.pk}" data-kind="serving"' in page
    assert "Work at full size" in page and "Must fit within" in page and "Checkpoints when preempted" in page
    assert all(field.help_text for field in form)


def test_the_submit_form_refuses_a_class_of_another_kind_on_the_class_field(fleet: Fleet, member: Client) -> None:
    response = member.post("/jobs/new/", _form(fleet, priority_class=fleet.serving.pk))
    assert response.status_code == 200
    assert "is for serving jobs, not training" in response.context["form"].errors["priority_class"][0]
    assert not Job.objects.exists()


def test_the_start_preview_says_a_job_that_fits_would_start_at_the_next_cycle(fleet: Fleet, member: Client) -> None:
    answer = member.get("/jobs/new/estimate/", _form(fleet, gpus=8, name=""))
    assert "Would start at the next scheduling cycle" in answer.content.decode()
    assert not Job.objects.exists()  # a preview writes nothing


def test_the_start_preview_gives_the_engines_reason_and_estimate_for_a_job_that_would_wait(
    fleet: Fleet, member: Client
) -> None:
    fleet.submit(gpus=32, duration_s=7200.0, time_limit_s=7200.0)
    fleet.tick()

    text = member.get("/jobs/new/estimate/", _form(fleet, gpus=16)).content.decode()
    assert "Would wait:" in text and "16 more H100 GPUs must free up (0 free now)" in text
    assert "Estimated start <strong>in 2h" in text


def test_the_start_preview_shows_what_the_submission_would_refuse(fleet: Fleet, member: Client) -> None:
    text = member.get("/jobs/new/estimate/", _form(fleet, gpus=64)).content.decode()
    assert "would be refused" in text and "only 32 H100 GPUs" in text


def test_an_outsider_cannot_preview_a_job_for_another_team(fleet: Fleet, outsider: Client) -> None:
    text = outsider.get("/jobs/new/estimate/", _form(fleet, gpus=8)).content.decode()
    assert "Would start" not in text and "Still to fix: Team" in text


def test_the_fleet_map_names_each_node_and_its_accelerator_and_marks_the_viewers_jobs(
    fleet: Fleet, member: Client, outsider: Client
) -> None:
    fleet.submit(gpus=8, name="ours")
    fleet.tick()

    page = member.get("/fleet/").content.decode()
    assert "pod-a-r1-n1" in page and ">H100<" in page
    assert len(re.findall(r'class="node [^"]*\bmine"', page)) == 1 and "8 by your team" in page
    assert 'id="node-dialog"' not in page  # members do not act on nodes
    assert not re.findall(r'class="node [^"]*\bmine"', outsider.get("/fleet/").content.decode())


def test_an_admin_gets_the_node_actions_on_the_fleet_map(fleet: Fleet, admin: Client) -> None:
    page = admin.get("/fleet/").content.decode()
    assert 'id="node-dialog"' in page and 'value="drain"' in page
