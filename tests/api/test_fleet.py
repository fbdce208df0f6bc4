"""The fleet, nodes, accelerators, incidents and usage reports through /api/v1/."""

from __future__ import annotations

import pytest

from scheduling.cycle.failures import node_kill
from scheduling.fleet_calendar import fleet_today
from scheduling.models import Incident, Node
from tenants.models import AuditEvent
from tests.api.conftest import People

ALL = ["lead", "member", "outsider", "finance", "admin"]


@pytest.mark.parametrize("who", ALL)
def test_everyone_reads_the_fleet_with_job_names_only_for_their_teams(people: People, who: str) -> None:
    people.fleet.submit(gpus=8, name="secret-run")
    people.fleet.tick()

    body = people.client(who).get("/api/v1/fleet/").json()

    nodes = [node for pod in body["pods"] for rack in pod["racks"] for node in rack["nodes"]]
    assert (body["nodes_count"], len(nodes), body["gpus"]) == (4, 4, 32)
    labels = [label for node in nodes for label in node["jobs"]]
    assert sum(node["allocated_gpus"] for node in nodes) == 8
    assert any("secret-run" in label for label in labels) is (who in ("lead", "member", "admin"))


def test_nodes_list_filters_by_state_and_rack(people: People) -> None:
    client = people.client("member")

    assert len(client.get("/api/v1/nodes/").json()["results"]) == 4
    assert len(client.get("/api/v1/nodes/?rack=pod-a-r1").json()["results"]) == 2
    assert client.get("/api/v1/nodes/?state=down").json()["results"] == []
    assert client.get("/api/v1/nodes/pod-a-r1-n1/").json()["pod"] == "pod-a"
    assert client.get("/api/v1/nodes/nowhere/").status_code == 404


@pytest.mark.parametrize("who", ["lead", "member", "outsider", "finance"])
def test_only_fleet_admins_cordon_uncordon_or_drain(people: People, who: str) -> None:
    client = people.client(who)

    codes = {client.post(f"/api/v1/nodes/pod-a-r1-n1/{verb}/").status_code for verb in ("cordon", "uncordon", "drain")}

    assert codes == {403}
    assert Node.objects.get(name="pod-a-r1-n1").state == Node.State.UP


def test_an_admin_drains_a_node_and_its_gang_goes_back_to_the_queue_audited(people: People) -> None:
    job = people.fleet.submit(gpus=8)
    people.fleet.tick()
    node = Node.objects.filter(allocated_gpus=8).get()
    admin = people.client("admin")

    drained = admin.post(f"/api/v1/nodes/{node.name}/drain/")
    back = admin.post(f"/api/v1/nodes/{node.name}/uncordon/")

    assert drained.json()["state"] == "cordoned"
    assert back.json()["state"] == "up"
    job.refresh_from_db()
    assert job.state in ("pending", "running")
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.NODE_DRAINED).exists()


@pytest.mark.parametrize("who", ALL)
def test_everyone_reads_accelerators_and_incidents(people: People, who: str) -> None:
    node_kill(node=people.fleet.nodes[0], sim_now_s=10.0)
    client = people.client(who)

    incidents = client.get("/api/v1/incidents/?open=true").json()["results"]

    assert client.get("/api/v1/accelerators/").json() == [{"name": "H100", "memory_gb": 80}]
    assert [(row["node"], row["kind"], row["jobs_affected"]) for row in incidents] == [("pod-a-r1-n1", "dead", 0)]
    assert client.get(f"/api/v1/incidents/{Incident.objects.get().pk}/").status_code == 200


@pytest.mark.parametrize(
    ("who", "status", "sees_team"),
    [
        ("lead", 200, True),
        ("member", 404, False),
        ("outsider", 200, False),
        ("finance", 200, True),
        ("admin", 200, True),
    ],
)
def test_usage_reports_are_for_finance_admins_and_leads_of_their_own_teams(
    people: People, who: str, status: int, sees_team: bool
) -> None:
    people.fleet.submit(gpus=8)
    for _ in range(3):
        people.fleet.tick()
    today = fleet_today().isoformat()

    response = people.client(who).get(f"/api/v1/reports/usage/?start={today}&end={today}")

    assert response.status_code == status
    if status == 200:
        rows = {row["team"]: row for row in response.json()["rows"]}
        assert ("Language Models" in rows) is sees_team
        if sees_team:
            assert rows["Language Models"]["used_gpu_h"] > 0


@pytest.mark.parametrize(
    ("query", "attr"),
    [
        ("start=2026-01-02&end=2026-01-01", "end"),
        ("start=yesterday&end=2026-01-01", "start"),
        ("end=2026-01-01", "start"),
    ],
)
def test_a_bad_report_period_is_a_field_error(people: People, query: str, attr: str) -> None:
    response = people.client("finance").get(f"/api/v1/reports/usage/?{query}")

    assert response.status_code == 400
    assert response.json()["errors"][0]["attr"] == attr
