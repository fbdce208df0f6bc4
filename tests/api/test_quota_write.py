"""PUT /api/v1/teams/{slug}/quotas/{accelerator}/: fleet admins set a team's quota directly."""

from __future__ import annotations

from typing import Any

import pytest

from tenants.models import AuditEvent, Notification, Quota
from tests.api.conftest import People
from tests.factories import QuotaFactory, TeamFactory

URL = "/api/v1/teams/language-models/quotas/H100/"
BODY = {"guaranteed": 20, "borrow_limit": None, "lend_limit": 4, "reason": "More room for the launch."}


def _fields(people: People) -> tuple[int, int | None, int | None]:
    quota = Quota.objects.get(team=people.fleet.team, accelerator_type=people.fleet.accelerator)
    return (quota.guaranteed, quota.borrow_limit, quota.lend_limit)


@pytest.mark.parametrize(
    ("who", "status"), [("lead", 403), ("member", 403), ("outsider", 404), ("finance", 404), ("admin", 200)]
)
def test_only_fleet_admins_set_a_teams_quota(people: People, who: str, status: int) -> None:
    response = people.client(who).put(URL, BODY, format="json")

    assert response.status_code == status
    assert _fields(people) == ((20, None, 4) if status == 200 else (16, 64, None))
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.QUOTA_SET).exists() is (status == 200)


def test_an_admin_sets_a_quota_and_reads_it_back_audited_with_the_leads_told(people: People) -> None:
    response = people.client("admin").put(URL, BODY, format="json")

    assert response.json() == {
        "accelerator": "H100",
        "guaranteed": 20,
        "borrow_limit": None,
        "lend_limit": 4,
        "fleet_gpus": 32,
        "in_use": 0,
        "borrowed": 0,
        "lent": 0,
    }
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.QUOTA_SET)
    assert event.before == {"guaranteed": 16, "borrow_limit": 64, "lend_limit": None}
    assert event.after == {"guaranteed": 20, "borrow_limit": None, "lend_limit": 4}
    assert list(Notification.objects.values_list("user__username", flat=True)) == ["lead"]


def test_omitted_limits_mean_unlimited(people: People) -> None:
    response = people.client("admin").put(URL, {"guaranteed": 8, "reason": "Shrink."}, format="json")

    assert response.status_code == 200
    assert _fields(people) == (8, None, None)


def test_a_quota_for_a_team_without_one_is_created(people: People) -> None:
    TeamFactory(name="Speech", slug="speech")

    response = people.client("admin").put("/api/v1/teams/speech/quotas/H100/", {**BODY, "guaranteed": 8}, format="json")

    assert response.status_code == 200
    assert Quota.objects.filter(team__slug="speech", guaranteed=8).exists()


def test_a_guarantee_beyond_fleet_capacity_is_a_400_that_says_why_and_changes_nothing(people: People) -> None:
    QuotaFactory(
        team=TeamFactory(name="Speech", slug="speech"), accelerator_type=people.fleet.accelerator, guaranteed=10
    )

    response = people.client("admin").put(URL, {**BODY, "guaranteed": 23}, format="json")

    assert response.status_code == 400
    assert (
        response.json()["errors"][0]["detail"] == "Guarantees for H100 would total 33 of 32 GPUs (overcommit ratio 1)."
    )
    assert _fields(people) == (16, 64, None)
    assert not AuditEvent.objects.exists() and not Notification.objects.exists()


@pytest.mark.parametrize(
    ("body", "attr"),
    [
        ({**BODY, "guaranteed": -1}, "guaranteed"),
        ({**BODY, "borrow_limit": -2}, "borrow_limit"),
        ({**BODY, "lend_limit": "many"}, "lend_limit"),
        ({key: value for key, value in BODY.items() if key != "guaranteed"}, "guaranteed"),
        ({**BODY, "reason": ""}, "reason"),
        ({**BODY, "reason": "   "}, "reason"),
    ],
)
def test_every_bad_field_is_a_400_naming_it(people: People, body: dict[str, Any], attr: str) -> None:
    response = people.client("admin").put(URL, body, format="json")

    assert response.status_code == 400
    assert [error["attr"] for error in response.json()["errors"]] == [attr]
    assert _fields(people) == (16, 64, None)


def test_an_unknown_accelerator_or_team_is_a_404(people: People) -> None:
    admin = people.client("admin")

    assert admin.put("/api/v1/teams/language-models/quotas/TPU/", BODY, format="json").status_code == 404
    assert admin.put("/api/v1/teams/nobody/quotas/H100/", BODY, format="json").status_code == 404


def test_the_write_is_documented_in_the_schema(people: People) -> None:
    schema = people.client("member").get("/api/v1/schema/?format=json").json()

    operation = schema["paths"]["/api/v1/teams/{slug}/quotas/{accelerator}/"]["put"]
    assert {"200", "400", "401", "403", "404"} <= set(operation["responses"])
    body = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    assert set(schema["components"]["schemas"][body]["required"]) == {"guaranteed", "reason"}
