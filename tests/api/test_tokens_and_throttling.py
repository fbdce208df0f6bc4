"""API tokens made, listed and revoked on the tokens page (each user their own, shown once,
stored as digests), and per-user throttling counted in Redis."""

from __future__ import annotations

import re
import time

import pytest
from django.core.cache import caches
from django.test import Client
from rest_framework.test import APIClient

from api.models import ApiToken
from api.throttling import ApiSubmitThrottle, ApiUserThrottle
from tests.api.conftest import People, submission
from tests.factories import UserFactory


def _logged_in(user: object) -> Client:
    client = Client()
    client.force_login(user)  # type: ignore[arg-type]
    return client


def _make(client: Client, name: str) -> str:
    response = client.post("/settings/tokens/", {"name": name})
    assert response.status_code == 200
    match = re.search(r'<code id="new-token-secret">([^<]+)</code>', response.content.decode())
    assert match, "the new token is shown once"
    return match.group(1)


def test_a_user_makes_a_named_token_that_works_once_shown_and_is_stored_only_as_a_digest(db: None) -> None:
    user = UserFactory()
    page = _logged_in(user)

    secret = _make(page, "nightly sweep")

    token = ApiToken.objects.get(user=user)
    assert token.name == "nightly sweep"
    assert secret not in (token.digest, token.token_key) and secret.startswith("fl_")
    listing = page.get("/settings/tokens/").content.decode()
    assert "nightly sweep" in listing and secret not in listing
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert api.get("/api/v1/teams/").status_code == 200


def test_several_tokens_per_user_and_revoking_one_stops_only_it(db: None) -> None:
    user = UserFactory()
    page = _logged_in(user)
    first, second = _make(page, "one"), _make(page, "two")
    key = ApiToken.objects.get(name="one").token_key

    page.post(f"/settings/tokens/{key}/revoke/")

    def status(secret: str) -> int:
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
        return api.get("/api/v1/teams/").status_code

    assert (status(first), status(second)) == (401, 200)
    assert list(ApiToken.objects.values_list("name", flat=True)) == ["two"]


def test_nobody_sees_or_revokes_another_users_tokens(db: None) -> None:
    owner, other = UserFactory(), UserFactory()
    _make(_logged_in(owner), "owner's")
    key = ApiToken.objects.get().token_key
    page = _logged_in(other)

    assert "owner&#x27;s" not in page.get("/settings/tokens/").content.decode()
    page.post(f"/settings/tokens/{key}/revoke/")
    assert ApiToken.objects.filter(user=owner).exists()


def test_a_token_needs_a_name(db: None) -> None:
    response = _logged_in(UserFactory()).post("/settings/tokens/", {"name": "   "})

    assert response.status_code == 400
    assert not ApiToken.objects.exists()


def test_the_tokens_page_needs_a_login() -> None:
    assert Client().get("/settings/tokens/").status_code == 302


@pytest.fixture
def tight_rates(settings: object, people: People) -> None:
    # Windows of a day, so that no window ends during the test.
    settings.API_THROTTLE_RATE = "5/day"  # type: ignore[attr-defined]
    settings.API_SUBMIT_THROTTLE_RATE = "2/day"  # type: ignore[attr-defined]
    # These users' counts from earlier tests (ids repeat across rolled-back tests) start afresh.
    for throttle in (ApiUserThrottle(), ApiSubmitThrottle()):
        for user in (people.member, people.lead):
            caches["throttle"].delete(throttle.window_key(user_id=user.pk, now=time.time())[0])


def test_the_count_is_one_key_per_user_and_window(people: People, tight_rates: None) -> None:
    people.client("member").get("/api/v1/teams/")

    key, period_s = ApiUserThrottle().window_key(user_id=people.member.pk, now=time.time())
    assert period_s == 86400
    assert caches["throttle"].get(key) == 1


def test_a_user_over_their_budget_gets_429_with_retry_after_others_do_not(people: People, tight_rates: None) -> None:
    member, lead = people.client("member"), people.client("lead")

    codes = [member.get("/api/v1/teams/").status_code for _ in range(6)]

    assert codes == [200] * 5 + [429]
    refused = member.get("/api/v1/teams/")
    assert int(refused["Retry-After"]) > 0
    assert refused.json()["errors"][0]["code"] == "throttled"
    assert lead.get("/api/v1/teams/").status_code == 200


def test_submissions_have_a_budget_of_their_own(people: People, tight_rates: None) -> None:
    member = people.client("member")

    codes = [member.post("/api/v1/jobs/", submission(people.fleet), format="json").status_code for _ in range(3)]

    assert codes == [201, 201, 429]
