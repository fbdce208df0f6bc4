"""Team pages: who sees them, and the lead's request form with its validation."""

from __future__ import annotations

import pytest

from tenants.models import QuotaRequest
from tests.factories import QuotaFactory, QuotaRequestFactory
from tests.tenants.conftest import World, client_for

pytestmark = pytest.mark.django_db

GOOD = {"guaranteed": "16", "borrow_limit": "8", "lend_limit": "", "justification": "Pre-training a 70B model."}


def _post(world: World, user_name: str, **overrides: str) -> object:
    data = {"accelerator_type": "H100", **GOOD, **overrides}
    return client_for(getattr(world, user_name)).post("/teams/language-models/", data)


def test_anonymous_users_are_sent_to_log_in(world: World) -> None:
    from django.test import Client

    response = Client().get("/teams/language-models/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


@pytest.mark.parametrize("who", ["lead", "member", "admin"])
def test_team_members_and_fleet_admins_see_the_team_page(world: World, who: str) -> None:
    QuotaFactory(team=world.team, accelerator_type=world.h100, guaranteed=24)
    response = client_for(getattr(world, who)).get("/teams/language-models/")
    assert response.status_code == 200
    assert b"Language Models" in response.content
    assert b'<td class="num guaranteed">24</td>' in response.content


@pytest.mark.parametrize("who", ["outsider", "finance"])
def test_outsiders_and_finance_get_a_404_for_the_team_page(world: World, who: str) -> None:
    assert client_for(getattr(world, who)).get("/teams/language-models/").status_code == 404


def test_an_unknown_team_is_a_404_like_a_foreign_one(world: World) -> None:
    assert client_for(world.admin).get("/teams/no-such-team/").status_code == 404


def test_the_team_list_shows_only_the_users_teams(world: World) -> None:
    body = client_for(world.member).get("/teams/").content
    assert b"Language Models" in body and b"Vision" not in body


def test_fleet_admins_see_every_team_in_the_list(world: World) -> None:
    body = client_for(world.admin).get("/teams/").content
    assert b"Language Models" in body and b"Vision" in body


def test_finance_sees_no_teams_in_the_list(world: World) -> None:
    body = client_for(world.finance).get("/teams/").content
    assert b"Language Models" not in body and b"Vision" not in body


def test_only_the_lead_sees_the_request_form(world: World) -> None:
    assert b"Request quota" in client_for(world.lead).get("/teams/language-models/").content
    assert b'id="request-quota"' not in client_for(world.member).get("/teams/language-models/").content
    assert b'id="request-quota"' not in client_for(world.admin).get("/teams/language-models/").content


def test_the_request_form_offers_accelerator_types_by_name(world: World) -> None:
    body = client_for(world.lead).get("/teams/language-models/").content.decode()

    assert '<option value="H100">H100</option>' in body
    assert f'<option value="{world.h100.pk}"' not in body


def test_a_lead_files_a_quota_request_that_is_audited(world: World) -> None:
    response = _post(world, "lead")
    assert response.status_code == 302
    request = QuotaRequest.objects.get()
    assert (request.guaranteed, request.borrow_limit, request.lend_limit) == (16, 8, None)
    assert request.state == QuotaRequest.State.PENDING
    assert request.requested_by == world.lead
    assert world.team.audit_events.get().kind == "quota_request.submitted"
    assert b"Pending" in client_for(world.lead).get("/teams/language-models/").content


@pytest.mark.parametrize("who, status", [("member", 404), ("admin", 404), ("outsider", 404), ("finance", 404)])
def test_nobody_but_the_lead_may_file_a_request(world: World, who: str, status: int) -> None:
    assert _post(world, who).status_code == status
    assert not QuotaRequest.objects.exists()


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("guaranteed", "-1", "greater than or equal to 0"),
        ("guaranteed", "", "This field is required"),
        ("guaranteed", "1.5", "Enter a whole number"),
        ("guaranteed", "lots", "Enter a whole number"),
        ("borrow_limit", "-4", "greater than or equal to 0"),
        ("lend_limit", "-4", "greater than or equal to 0"),
        ("lend_limit", "x", "Enter a whole number"),
        ("accelerator_type", "TPUv9", "The fleet has no accelerator type named “TPUv9”: choose one of the list."),
        ("accelerator_type", "1", "The fleet has no accelerator type named “1”"),
        ("accelerator_type", "", "This field is required"),
        ("justification", "", "This field is required"),
        ("justification", "more", "at least 10 characters"),
    ],
)
def test_each_bad_input_is_refused_with_an_error_next_to_its_field(
    world: World, field: str, value: str, message: str
) -> None:
    response = _post(world, "lead", **{field: value})
    assert response.status_code == 400
    assert f'id="id_{field}-errors"'.encode() in response.content
    assert message in response.content.decode()
    assert not QuotaRequest.objects.exists()


def test_a_second_pending_request_for_the_same_type_is_refused(world: World) -> None:
    QuotaRequestFactory(team=world.team, accelerator_type=world.h100, requested_by=world.lead)
    response = _post(world, "lead")
    assert response.status_code == 400
    assert 'id="id_accelerator_type-errors"' in response.content.decode()
    assert "already has a pending request for H100" in response.content.decode()
    assert QuotaRequest.objects.count() == 1


def test_a_pending_request_for_another_type_is_no_obstacle(world: World) -> None:
    QuotaRequestFactory(team=world.team, accelerator_type=world.a100, requested_by=world.lead)
    assert _post(world, "lead").status_code == 302
    assert QuotaRequest.objects.count() == 2


def test_the_lead_withdraws_a_pending_request(world: World) -> None:
    request = QuotaRequestFactory(team=world.team, accelerator_type=world.h100, requested_by=world.lead)
    response = client_for(world.lead).post(f"/teams/language-models/quota-requests/{request.pk}/withdraw/")
    assert response.status_code == 302
    request.refresh_from_db()
    assert request.state == QuotaRequest.State.WITHDRAWN
    event = world.team.audit_events.get(kind="quota_request.withdrawn")
    assert event.before == {"state": "pending"} and event.after == {"state": "withdrawn"}
    # Withdrawing frees the slot for a new request of the same type.
    assert _post(world, "lead").status_code == 302


def test_a_decided_request_cannot_be_withdrawn(world: World) -> None:
    request = QuotaRequestFactory(
        team=world.team, accelerator_type=world.h100, requested_by=world.lead, state="rejected"
    )
    client = client_for(world.lead)
    response = client.post(f"/teams/language-models/quota-requests/{request.pk}/withdraw/", follow=True)
    assert "no longer pending" in response.content.decode()
    request.refresh_from_db()
    assert request.state == "rejected"


@pytest.mark.parametrize("who", ["member", "admin", "outsider", "finance"])
def test_nobody_but_the_lead_may_withdraw(world: World, who: str) -> None:
    request = QuotaRequestFactory(team=world.team, accelerator_type=world.h100, requested_by=world.lead)
    response = client_for(getattr(world, who)).post(f"/teams/language-models/quota-requests/{request.pk}/withdraw/")
    assert response.status_code == 404
    request.refresh_from_db()
    assert request.state == "pending"


def test_a_lead_cannot_withdraw_another_teams_request_through_their_own_team(world: World) -> None:
    foreign = QuotaRequestFactory(team=world.other_team, accelerator_type=world.h100, requested_by=world.outsider)
    response = client_for(world.lead).post(f"/teams/language-models/quota-requests/{foreign.pk}/withdraw/")
    assert response.status_code == 404
    foreign.refresh_from_db()
    assert foreign.state == "pending"


def test_withdraw_needs_a_post(world: World) -> None:
    request = QuotaRequestFactory(team=world.team, accelerator_type=world.h100, requested_by=world.lead)
    response = client_for(world.lead).get(f"/teams/language-models/quota-requests/{request.pk}/withdraw/")
    assert response.status_code == 405
