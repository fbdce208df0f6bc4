"""The what-if pages: who sees what (admin, the team's lead, its member, an outsider), starting a
replay from the form, the trace's errors beside the file, progress, cancel and the report."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from simulations.models import Simulation
from simulations.services import simulation_run
from tests.simulations.conftest import BAD_TRACE, GOOD_TRACE, SMALL_FLEET, People


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
