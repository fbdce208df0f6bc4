"""/api/v1/simulations/: start a replay (multipart trace or JSON history), follow it, read its
results, cancel it; the same permissions as the pages and the v1 error format."""

from __future__ import annotations

import json
from typing import Any

from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from simulations.models import Simulation
from simulations.services import simulation_run
from tests.simulations.conftest import BAD_TRACE, GOOD_TRACE, SMALL_FLEET, People

URL = "/api/v1/simulations/"


def _api(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _multipart(**overrides: Any) -> dict[str, Any]:
    data = {
        "source": "trace",
        "team": "alpha",
        "preset": "fleetline",
        "trace": SimpleUploadedFile("jobs.csv", GOOD_TRACE),
        "fleet_spec": SMALL_FLEET,
        "policy_settings": json.dumps({"preemption": False}),
    }
    data.update(overrides)
    return data


def test_a_lead_starts_a_replay_follows_it_and_reads_the_results(people: People) -> None:
    lead = _api(people.lead)
    created = lead.post(URL, _multipart(), format="multipart")
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["state"], body["team"], body["jobs"], body["policy_settings"]) == (
        "queued",
        "alpha",
        4,
        {"preemption": False},
    )
    assert created["Location"] == f"{URL}{body['id']}/"

    simulation_run(simulation_id=body["id"])
    detail = lead.get(f"{URL}{body['id']}/").json()
    assert detail["state"] == "succeeded"
    assert set(detail["results"]) == {"meta", "candidate", "current"}
    assert detail["results"]["candidate"]["jobs"] == 4
    assert detail["report_url"] == f"/simulations/{body['id']}/report/"
    assert [item["id"] for item in lead.get(URL).json()["results"]] == [body["id"]]


def test_an_admin_replays_the_fleet_history_with_json(people: People) -> None:
    response = _api(people.admin).post(
        URL, {"source": "history", "history_days": 3, "fleet_spec": SMALL_FLEET}, format="json"
    )
    # An empty fleet history has nothing to replay: the v1 error format names the field.
    assert response.status_code == 400
    assert response.json()["errors"][0]["attr"] == "history_days"


def test_a_bad_trace_answers_400_with_each_line_numbered_error(people: People) -> None:
    response = _api(people.admin).post(
        URL, _multipart(trace=SimpleUploadedFile("bad.csv", BAD_TRACE)), format="multipart"
    )
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert [(e["attr"], e["detail"]) for e in errors] == [
        ("trace", "bad.csv:3: column 'duration': 'soon' is not a number"),
        ("trace", "bad.csv:4: column 'gpus': 0 is below the minimum 1"),
    ]
    assert not Simulation.objects.exists()


def test_policy_settings_that_are_not_json_are_refused(people: People) -> None:
    response = _api(people.admin).post(URL, _multipart(policy_settings="{backfill"), format="multipart")
    assert response.status_code == 400
    assert response.json()["errors"][0]["attr"] == "policy_settings"


def test_members_and_outsiders_cannot_start_or_see_a_teams_replays(people: People, team_simulation: Simulation) -> None:
    for user in (people.member, people.outsider):
        client = _api(user)
        assert client.post(URL, _multipart(), format="multipart").status_code == 403
        assert client.get(URL).json()["results"] == []
        assert client.get(f"{URL}{team_simulation.pk}/").status_code == 404
        assert client.post(f"{URL}{team_simulation.pk}/cancel/").status_code == 404
    assert _api(people.admin).get(f"{URL}{team_simulation.pk}/").status_code == 200


def test_an_unknown_team_is_a_validation_error(people: People) -> None:
    response = _api(people.admin).post(URL, _multipart(team="nobody"), format="multipart")
    assert response.status_code == 400
    assert response.json()["errors"][0]["attr"] == "team"


def test_cancel_answers_the_replay_and_409_once_it_has_ended(people: People, team_simulation: Simulation) -> None:
    lead = _api(people.lead)
    first = lead.post(f"{URL}{team_simulation.pk}/cancel/")
    assert (first.status_code, first.json()["state"]) == (200, "cancelled")
    assert lead.post(f"{URL}{team_simulation.pk}/cancel/").status_code == 409
    schema = lead.get("/api/v1/schema/?format=json").json()
    assert "409" in schema["paths"]["/api/v1/simulations/{id}/cancel/"]["post"]["responses"]


def test_anonymous_calls_get_401(db: None) -> None:
    response = APIClient().get(URL)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_ids_beyond_the_id_column_are_not_found(people: People) -> None:
    assert _api(people.admin).get(f"{URL}{2**70}/").status_code == 404
    assert _api(people.admin).get(f"{URL}abc/").status_code == 404
