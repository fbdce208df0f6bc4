"""Teams, members, quotas, quota requests, priority classes and policy through /api/v1/."""

from __future__ import annotations

import pytest

from scheduling.convert import policy_from_row
from tenants.models import AuditEvent, FleetPolicy, Membership, PriorityClass, Quota, QuotaRequest
from tests.api.conftest import People
from tests.factories import QuotaRequestFactory

TEAM = "/api/v1/teams/language-models/"


@pytest.mark.parametrize(
    ("who", "sees"), [("lead", True), ("member", True), ("outsider", False), ("finance", False), ("admin", True)]
)
def test_who_sees_a_team_its_members_and_its_quotas(people: People, who: str, sees: bool) -> None:
    client = people.client(who)

    listed = [team["slug"] for team in client.get("/api/v1/teams/").json()]
    codes = [client.get(f"{TEAM}{part}").status_code for part in ("", "members/", "quotas/")]

    assert ("language-models" in listed) is sees
    assert codes == ([200] * 3 if sees else [404] * 3)


def test_a_teams_quota_reads_guarantee_and_use(people: People) -> None:
    people.fleet.submit(gpus=8)
    people.fleet.tick()

    rows = people.client("member").get(f"{TEAM}quotas/").json()

    assert rows == [
        {
            "accelerator": "H100",
            "guaranteed": 16,
            "borrow_limit": 64,
            "lend_limit": None,
            "fleet_gpus": 32,
            "in_use": 8,
            "borrowed": 0,
            "lent": 0,
        }
    ]


@pytest.mark.parametrize(
    ("who", "status"), [("lead", 201), ("member", 403), ("outsider", 404), ("finance", 404), ("admin", 201)]
)
def test_leads_and_fleet_admins_add_members(people: People, who: str, status: int) -> None:
    response = people.client(who).post(f"{TEAM}members/", {"username": "finance", "role": "member"}, format="json")

    assert response.status_code == status
    assert Membership.objects.filter(user=people.finance).exists() is (status == 201)
    if status == 201:
        assert AuditEvent.objects.filter(kind=AuditEvent.Kind.MEMBER_ADDED).exists()


def test_a_lead_removes_a_member_but_cannot_add_a_lead_or_change_roles(people: People) -> None:
    lead = people.client("lead")

    assert lead.post(f"{TEAM}members/", {"username": "finance", "role": "lead"}, format="json").status_code == 403
    assert lead.patch(f"{TEAM}members/member/", {"role": "lead"}, format="json").status_code == 403
    assert Membership.objects.get(user=people.member).role == "member"
    assert lead.delete(f"{TEAM}members/member/").status_code == 204
    assert not Membership.objects.filter(user=people.member).exists()


def test_a_member_cannot_remove_anyone(people: People) -> None:
    assert people.client("member").delete(f"{TEAM}members/lead/").status_code == 403
    assert Membership.objects.filter(user=people.lead).exists()


def test_an_admin_changes_a_role_and_removes_a_member_audited(people: People) -> None:
    admin = people.client("admin")

    changed = admin.patch(f"{TEAM}members/member/", {"role": "lead"}, format="json")
    removed = admin.delete(f"{TEAM}members/member/")

    assert (changed.status_code, changed.json()["role"]) == (200, "lead")
    assert removed.status_code == 204
    assert not Membership.objects.filter(user=people.member).exists()
    assert admin.delete(f"{TEAM}members/member/").status_code == 404
    kinds = set(AuditEvent.objects.values_list("kind", flat=True))
    assert {AuditEvent.Kind.MEMBER_ROLE_CHANGED, AuditEvent.Kind.MEMBER_REMOVED} <= kinds


def test_adding_an_unknown_user_is_a_field_error(people: People) -> None:
    response = people.client("admin").post(f"{TEAM}members/", {"username": "ghost"}, format="json")

    assert response.status_code == 400
    assert response.json()["errors"][0]["attr"] == "username"


# Quota requests ---------------------------------------------------------------------------------


def _ask(people: People, who: str = "lead", **overrides: object) -> object:
    body = {"team": "language-models", "accelerator": "H100", "guaranteed": 24, "justification": "More runs."}
    body.update(overrides)
    return people.client(who).post("/api/v1/quota-requests/", body, format="json")


@pytest.mark.parametrize(("who", "status"), [("lead", 201), ("member", 403), ("outsider", 404), ("finance", 404)])
def test_only_the_teams_lead_requests_quota(people: People, who: str, status: int) -> None:
    response = _ask(people, who)

    assert response.status_code == status  # type: ignore[attr-defined]
    assert QuotaRequest.objects.exists() is (status == 201)


def test_a_request_with_bad_numbers_or_a_duplicate_is_refused(people: People) -> None:
    assert _ask(people, guaranteed=-1).status_code == 400  # type: ignore[attr-defined]
    assert _ask(people, accelerator="TPU").status_code == 400  # type: ignore[attr-defined]
    assert _ask(people).status_code == 201  # type: ignore[attr-defined]
    duplicate = _ask(people)
    assert duplicate.status_code == 400  # type: ignore[attr-defined]
    assert "already has a pending request" in duplicate.json()["errors"][0]["detail"]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("who", "sees"), [("lead", True), ("member", True), ("outsider", False), ("finance", False), ("admin", True)]
)
def test_who_sees_a_teams_quota_requests(people: People, who: str, sees: bool) -> None:
    request = QuotaRequestFactory(team=people.fleet.team, accelerator_type=people.fleet.accelerator)
    client = people.client(who)

    listed = [row["id"] for row in client.get("/api/v1/quota-requests/").json()["results"]]

    assert (request.pk in listed) is sees
    assert client.get(f"/api/v1/quota-requests/{request.pk}/").status_code == (200 if sees else 404)


def test_an_admin_approves_a_request_and_the_quota_changes_audited(people: People) -> None:
    request_id = _ask(people).json()["id"]  # type: ignore[attr-defined]

    response = people.client("admin").post(f"/api/v1/quota-requests/{request_id}/approve/", {"note": "ok"})

    assert (response.status_code, response.json()["state"], response.json()["decided_by"]) == (200, "approved", "admin")
    assert Quota.objects.get(team=people.fleet.team).guaranteed == 24
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.QUOTA_REQUEST_APPROVED).exists()


@pytest.mark.parametrize("who", ["lead", "member"])
def test_team_people_cannot_decide_their_own_requests(people: People, who: str) -> None:
    request_id = _ask(people).json()["id"]  # type: ignore[attr-defined]
    client = people.client(who)

    assert client.post(f"/api/v1/quota-requests/{request_id}/approve/").status_code == 403
    assert client.post(f"/api/v1/quota-requests/{request_id}/reject/", {"note": "no"}).status_code == 403
    assert QuotaRequest.objects.get(pk=request_id).state == "pending"


def test_a_rejection_needs_a_note_and_a_decided_request_stays_decided(people: People) -> None:
    request_id = _ask(people).json()["id"]  # type: ignore[attr-defined]
    admin = people.client("admin")

    assert admin.post(f"/api/v1/quota-requests/{request_id}/reject/", {"note": " "}).status_code == 400
    assert admin.post(f"/api/v1/quota-requests/{request_id}/reject/", {"note": "Not now."}).status_code == 200
    assert admin.post(f"/api/v1/quota-requests/{request_id}/approve/").status_code == 400
    assert QuotaRequest.objects.get(pk=request_id).state == "rejected"


def test_approval_beyond_fleet_capacity_is_refused(people: People) -> None:
    request_id = _ask(people, guaranteed=1000).json()["id"]  # type: ignore[attr-defined]

    response = people.client("admin").post(f"/api/v1/quota-requests/{request_id}/approve/")

    assert response.status_code == 400
    assert "would total" in response.json()["errors"][0]["detail"]


@pytest.mark.parametrize(("who", "status"), [("lead", 200), ("member", 403), ("outsider", 404), ("admin", 403)])
def test_only_the_teams_lead_withdraws(people: People, who: str, status: int) -> None:
    request_id = _ask(people).json()["id"]  # type: ignore[attr-defined]

    response = people.client(who).post(f"/api/v1/quota-requests/{request_id}/withdraw/")

    assert response.status_code == status
    assert QuotaRequest.objects.get(pk=request_id).state == ("withdrawn" if status == 200 else "pending")


# Priority classes and policy --------------------------------------------------------------------


@pytest.mark.parametrize("who", ["lead", "member", "outsider", "finance", "admin"])
def test_everyone_reads_priority_classes_and_policy(people: People, who: str) -> None:
    client = people.client(who)

    names = [row["name"] for row in client.get("/api/v1/priority-classes/").json()]
    policy = client.get("/api/v1/policy/")

    assert names == ["serving", "training"]
    assert policy.status_code == 200
    assert policy.json()["preemption_grace_s"] == 60.0


@pytest.mark.parametrize("who", ["lead", "member", "outsider", "finance"])
def test_only_fleet_admins_change_priority_classes_and_policy(people: People, who: str) -> None:
    client = people.client(who)
    new_class = {"name": "urgent", "value": 700, "kind": "training", "preemptible": True, "may_preempt": False}

    assert client.post("/api/v1/priority-classes/", new_class, format="json").status_code == 403
    assert client.patch("/api/v1/priority-classes/training/", {"value": 1}, format="json").status_code == 403
    assert client.patch("/api/v1/policy/", {"backfill": False}, format="json").status_code == 403
    assert not PriorityClass.objects.filter(name="urgent").exists()
    assert FleetPolicy.objects.get().backfill is True


def test_an_admin_adds_a_class_and_changes_the_policy_audited(people: People) -> None:
    admin = people.client("admin")
    new_class = {"name": "urgent", "value": 700, "kind": "training", "preemptible": True, "may_preempt": False}

    created = admin.post("/api/v1/priority-classes/", new_class, format="json")
    changed = admin.patch("/api/v1/priority-classes/urgent/", {"value": 650}, format="json")
    policy = admin.patch("/api/v1/policy/", {"backfill": False, "reservation_depth": 2}, format="json")

    assert (created.status_code, changed.json()["value"]) == (201, 650)
    assert (policy.json()["backfill"], policy.json()["reservation_depth"]) == (False, 2)
    kinds = set(AuditEvent.objects.values_list("kind", flat=True))
    assert {AuditEvent.Kind.PRIORITY_CLASS_SAVED, AuditEvent.Kind.FLEET_POLICY_UPDATED} <= kinds


def test_bad_policy_values_are_refused_and_nothing_changes(people: People) -> None:
    response = people.client("admin").patch(
        "/api/v1/policy/", {"topology_penalty_pod": 0.5, "backfill": False}, format="json"
    )

    assert response.status_code == 400
    assert response.json()["errors"][0]["attr"] == "topology_penalty_pod"
    assert FleetPolicy.objects.get().backfill is True


@pytest.mark.parametrize(
    ("field", "default", "value"),
    [
        ("guarantee_spread_after_s", 0.0, 3600.0),  # the patience of gangs below their guarantee
        ("partial_reclaim_young_s", 7200.0, 600.0),  # the young loans a partial reclaim may take
        ("reclaim_wait_credit", None, 4.0),  # the credit of a reclaim of loans
    ],
)
def test_an_admin_sets_an_optional_bound_of_the_policy_through_the_api(
    people: People, field: str, default: float | None, value: float
) -> None:
    admin = people.client("admin")

    assert admin.get("/api/v1/policy/").json()[field] == default
    changed = admin.patch("/api/v1/policy/", {field: value}, format="json")
    assert getattr(policy_from_row(FleetPolicy.objects.get()), field) == value
    unset = admin.patch("/api/v1/policy/", {field: None}, format="json")
    refused = admin.patch("/api/v1/policy/", {field: -1.0}, format="json")

    assert changed.json()[field] == value
    assert unset.json()[field] is None
    assert refused.status_code == 400 and refused.json()["errors"][0]["attr"] == field
    assert getattr(policy_from_row(FleetPolicy.objects.get()), field) is None
