"""The what-if pages: who sees what (admin, the team's lead, its member, an outsider), starting a
replay from the form, the trace's errors beside the file, progress, cancel and the report."""

from __future__ import annotations

import re
from html import unescape
from typing import Any

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from simulations.models import Simulation
from simulations.services import simulation_run, simulation_start
from tests.simulations.conftest import BAD_TRACE, GOOD_TRACE, SMALL_FLEET, People, trace_request


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _form(**overrides: Any) -> dict[str, Any]:
    data = {
        "team": "",
        "source": "trace",
        "trace": SimpleUploadedFile("jobs.csv", GOOD_TRACE, content_type="text/csv"),
        "trace_format": "canonical",
        "preset": "easy",
        "fleet_spec": SMALL_FLEET,
        "seed": "0",
        "backfill": "off",
        "reservation_depth": "2",
    }
    data.update(overrides)
    return data


def test_an_admin_starts_a_replay_from_the_form_and_lands_on_its_page(people: People) -> None:
    response = _client(people.admin).post("/simulations/", _form())
    simulation = Simulation.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/simulations/{simulation.pk}/"
    assert (simulation.team, simulation.trace_name, simulation.jobs) == (None, "jobs.csv", 4)
    assert simulation.policy_settings == {"backfill": False, "reservation_depth": 2}


def test_a_bad_trace_is_shown_with_its_line_numbered_errors(people: People) -> None:
    response = _client(people.admin).post("/simulations/", _form(trace=SimpleUploadedFile("bad.csv", BAD_TRACE)))
    assert response.status_code == 400
    assert b"bad.csv:3: column &#x27;duration&#x27;: &#x27;soon&#x27; is not a number" in response.content
    assert not Simulation.objects.exists()


def test_an_upload_larger_than_the_bound_is_refused_unread(people: People, settings: Any) -> None:
    settings.SIMULATION_MAX_TRACE_BYTES = 10
    big = SimpleUploadedFile("big.csv", GOOD_TRACE + b"x" * 70_000)
    response = _client(people.admin).post("/simulations/", _form(trace=big))
    assert response.status_code == 400
    assert b"a trace may have at most 10" in response.content
    assert not Simulation.objects.exists()


def test_a_lead_starts_replays_for_their_own_team_only(people: People) -> None:
    lead = _client(people.lead)
    page = lead.get("/simulations/")
    assert b'value="alpha"' in page.content and b'value="beta"' not in page.content
    assert lead.post("/simulations/", _form(team="beta")).status_code == 400
    assert lead.post("/simulations/", _form(team="")).status_code == 400
    assert lead.post("/simulations/", _form(team="alpha")).status_code == 302
    assert Simulation.objects.get().team == people.alpha


@pytest.mark.parametrize("who", ["member", "outsider"])
def test_people_who_may_not_start_replays_see_why_and_cannot_post(people: People, who: str) -> None:
    client = _client(getattr(people, who) if who == "member" else people.member)
    page = client.get("/simulations/")
    assert page.status_code == 200
    assert b'id="not-allowed"' in page.content
    assert client.post("/simulations/", _form(team="alpha")).status_code == 403
    assert not Simulation.objects.exists()


@pytest.mark.parametrize(("who", "status"), [("admin", 200), ("lead", 200), ("member", 404), ("outsider", 404)])
def test_a_teams_replay_is_seen_by_admins_and_the_teams_leads_only(
    people: People, team_simulation: Simulation, who: str, status: int
) -> None:
    client = _client(getattr(people, who))
    for suffix in ["", "progress/"]:
        assert client.get(f"/simulations/{team_simulation.pk}/{suffix}").status_code == status
    assert client.post(f"/simulations/{team_simulation.pk}/cancel/").status_code in {status, 302}
    listed = client.get("/simulations/").content
    assert (f'id="simulation-{team_simulation.pk}"'.encode() in listed) is (status == 200)


def test_a_whole_fleet_replay_is_for_admins_only(people: People, fleet_simulation: Simulation) -> None:
    assert _client(people.admin).get(f"/simulations/{fleet_simulation.pk}/").status_code == 200
    assert _client(people.lead).get(f"/simulations/{fleet_simulation.pk}/").status_code == 404


def test_the_results_page_puts_the_replay_beside_the_current_policy_with_its_charts(
    people: People, team_simulation: Simulation
) -> None:
    lead = _client(people.lead)
    queued = lead.get(f"/simulations/{team_simulation.pk}/")
    assert b'id="simulation-progress"' in queued.content
    assert lead.get(f"/simulations/{team_simulation.pk}/report/").status_code == 404

    simulation_run(simulation_id=team_simulation.pk)
    page = lead.get(f"/simulations/{team_simulation.pk}/")
    assert b'id="simulation-results"' in page.content
    assert b'data-metric="utilisation"' in page.content and b'data-metric="jct_p99_s"' in page.content
    assert b"Current policy" in page.content
    tick_s = settings.FLEET_CYCLE_INTERVAL_S * settings.FLEET_CLOCK_SPEED  # the live cycle's tick
    assert f"once per tick of {tick_s:g} fleet seconds".encode() in page.content
    report = lead.get(f"/simulations/{team_simulation.pk}/report/")
    assert report.status_code == 200
    assert report["X-Frame-Options"] == "SAMEORIGIN"
    assert b"Fleet simulation" in report.content
    assert lead.get(f"/simulations/{team_simulation.pk}/progress/").json() == {
        "state": "succeeded",
        "state_label": Simulation.State.SUCCEEDED.label,
        "progress": 1.0,
        "finished": True,
    }


def test_cancelling_from_the_page_stops_a_queued_replay(people: People, team_simulation: Simulation) -> None:
    response = _client(people.lead).post(f"/simulations/{team_simulation.pk}/cancel/")
    assert response.status_code == 302
    team_simulation.refresh_from_db()
    assert team_simulation.state == "cancelled"


def test_the_nav_links_to_the_replays(people: People) -> None:
    assert b'href="/simulations/"' in _client(people.member).get("/simulations/").content


def test_the_progress_poll_does_not_load_the_stored_trace_or_report(
    people: People, team_simulation: Simulation
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    lead = _client(people.lead)
    with CaptureQueriesContext(connection) as queries:
        assert lead.get(f"/simulations/{team_simulation.pk}/progress/").status_code == 200
    assert not any("trace_text" in q["sql"] or "report_html_z" in q["sql"] for q in queries.captured_queries)


def _result_rows(html: str) -> dict[str, list[str]]:
    """The results table's rows by metric key: the cells' text (name, replayed, current, difference)."""
    rows = re.findall(r'<tr data-metric="([^"]+)">(.*?)</tr>', html, re.S)
    return {
        key: [
            unescape(re.sub(r"<[^>]+>", "", cell)).strip()
            for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", body, re.S)
        ]
        for key, body in rows
    }


def test_both_utilisations_read_the_same_way_and_counters_get_no_verdict(
    people: People, team_simulation: Simulation
) -> None:
    simulation_run(simulation_id=team_simulation.pk)
    team_simulation.refresh_from_db()
    results = team_simulation.results
    for key in ("utilisation", "training_utilisation"):
        results["candidate"][key], results["current"][key] = 0.5, 0.5028
    results["candidate"]["cycles"], results["current"]["cycles"] = 40, 63
    Simulation.objects.filter(pk=team_simulation.pk).update(results=results)

    rows = _result_rows(_client(people.lead).get(f"/simulations/{team_simulation.pk}/").content.decode())
    assert rows["utilisation"] == ["Utilisation, %", "50.0", "50.3", "\u22120.3 (worse)"]
    assert rows["training_utilisation"] == ["Training utilisation, %", "50.0", "50.3", "\u22120.3 (worse)"]
    assert rows["cycles"] == ["Scheduling cycles", "40", "63", "\u221223"]


def test_the_results_show_human_names_and_rounded_numbers(people: People, team_simulation: Simulation) -> None:
    simulation_run(simulation_id=team_simulation.pk)
    team_simulation.refresh_from_db()
    rows = _result_rows(_client(people.lead).get(f"/simulations/{team_simulation.pk}/").content.decode())
    assert set(rows) == set(team_simulation.results["candidate"]) - {"policy"}
    for key, cells in rows.items():
        name = cells[0]
        assert "_" not in name and name[0].isupper(), f"{key} is shown as {name!r}"
        for cell in cells[1:]:
            assert not re.search(r"\d\.\d{4,}", cell), f"{name}: {cell!r} is not rounded for reading"
    assert rows["jct_mean_s"][0] == "Job completion time, mean, h"


def test_a_full_day_replays_pages_each_weigh_under_a_megabyte(people: People) -> None:
    # A day of submissions (one every ten minutes) whose work runs on for days after: every chart
    # line is at its longest (the report thins lines to a fixed number of points, so a longer
    # replay adds nothing: tests/sim/test_report.py).
    lines = ["job_id,submit_time,duration,gpus,team"]
    lines += [f"j{i},{i * 600},{3600 * (1 + i % 12)},{(1, 2, 4, 8, 16)[i % 5]},{'ab'[i % 2]}" for i in range(144)]
    trace = ("\n".join(lines) + "\n").encode()
    simulation = simulation_start(user=people.admin, request=trace_request(trace_data=trace))
    assert simulation_run(simulation_id=simulation.pk) == Simulation.State.SUCCEEDED
    admin = _client(people.admin)
    page = admin.get(f"/simulations/{simulation.pk}/")
    report = admin.get(f"/simulations/{simulation.pk}/report/")
    assert len(page.content) < 1_000_000
    assert len(report.content) < 1_000_000
    assert report.status_code == 200 and b"vendor/plotly/plotly.min.js" in report.content  # from the site


def test_jobs_left_out_of_the_replay_are_counted_by_reason_in_words(people: People) -> None:
    trace = GOOD_TRACE + b"j5,240,600,64,beta\nj6,300,600,32,alpha\n"  # the fleet has 16 GPUs
    simulation = simulation_start(user=people.admin, request=trace_request(trace_data=trace))
    assert simulation_run(simulation_id=simulation.pk) == Simulation.State.SUCCEEDED
    page = _client(people.admin).get(f"/simulations/{simulation.pk}/").content.decode()
    dropped = re.search(r'<p class="hint" id="simulation-dropped">(.*?)</p>', page, re.S)
    assert dropped is not None
    assert dropped.group(1) == "2 jobs could not run on this fleet and were left out: 2 larger than the fleet."
