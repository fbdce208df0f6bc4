"""Single sign-on end to end against a real OpenID Connect provider (django-oauth-toolkit in a
second process, `tests.oidc_provider`): the login page's button, the authorization code flow with
PKCE through the provider's own login form, accounts and mapped access from its groups claim, the
refusals people see, and the password login and its lockout beside it."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.models import User
from django.http import HttpResponse
from django.test import Client

from portal.oidc_config import oidc_config_from_env
from tenants.models import AuditEvent, Membership, Team
from tenants.permissions import is_fleet_admin
from tenants.services.sso import SOURCE
from tests.factories import PASSWORD, TeamFactory, UserFactory
from tests.oidc_provider.fixtures import OidcProvider, provider_sign_in

pytestmark = pytest.mark.django_db

SECRET = "fleetline-test-client-secret"


@pytest.fixture
def vision() -> Team:
    return TeamFactory(name="Vision", slug="vision")


@pytest.fixture
def sso(settings: Any, oidc_provider: OidcProvider) -> OidcProvider:
    """Fleetline as the provider's client, the test client's host as its callback."""
    oidc_provider.client_put(
        client_id="fleetline", client_secret=SECRET, redirect_uris=["http://testserver/oidc/callback/"]
    )
    settings.FLEETLINE_OIDC = oidc_config_from_env(
        {
            "FLEETLINE_OIDC_PROVIDER_NAME": "Test IdP",
            "FLEETLINE_OIDC_ISSUER": oidc_provider.issuer,
            "FLEETLINE_OIDC_CLIENT_ID": "fleetline",
            "FLEETLINE_OIDC_CLIENT_SECRET": SECRET,
            "FLEETLINE_OIDC_SCOPES": "openid profile email groups",
            "FLEETLINE_OIDC_GROUP_MAP": "ml-admins=role:admin,vision-team=team:vision:lead",
        }
    )
    return oidc_provider


def sign_in(client: Client, username: str, next_path: str = "") -> HttpResponse:
    """Press "Sign in with", sign in at the provider, and come back to the callback."""
    start = client.get("/oidc/authenticate/", {"next": next_path} if next_path else {})
    assert start.status_code == 302, start
    authorize = urlsplit(start["Location"])
    query = parse_qs(authorize.query)
    assert query["code_challenge_method"] == ["S256"] and query["nonce"] and query["state"]
    back = urlsplit(provider_sign_in(start["Location"], username))
    assert back.path == "/oidc/callback/"
    response: HttpResponse = client.get(f"{back.path}?{back.query}")
    return response


def test_the_login_page_offers_the_provider_beside_the_password_form_only_when_configured(
    settings: Any, sso: OidcProvider
) -> None:
    page = Client().get("/login/?next=/teams/").content.decode()
    assert 'id="id_password"' in page
    assert 'href="/oidc/authenticate/?next=/teams/">Sign in with Test IdP</a>' in page

    settings.FLEETLINE_OIDC = None
    page = Client().get("/login/").content.decode()
    assert "Sign in with" not in page and 'id="id_password"' in page
    assert Client().get("/oidc/authenticate/").status_code == 404
    assert Client().get("/oidc/callback/").status_code == 404


def test_a_first_login_creates_the_account_with_its_mapped_role_and_team(sso: OidcProvider, vision: Team) -> None:
    sso.user_put("alice", groups=["ml-admins", "vision-team", "unmapped"])
    client = Client()

    response = sign_in(client, "alice", next_path="/teams/")

    assert response.status_code == 302 and response["Location"] == "/teams/"
    alice = User.objects.get(username="alice")
    assert int(client.session["_auth_user_id"]) == alice.pk
    assert alice.email == "alice@example.org" and not alice.has_usable_password()
    assert is_fleet_admin(alice)
    assert Membership.objects.get(user=alice).team == vision
    assert Membership.objects.get(user=alice).role == Membership.Role.LEAD
    # The audit log says who did it: single sign-on, not a person and not the scheduler.
    page = client.get("/admin-portal/audit/").content.decode()
    assert "Account created at its first single sign-on" in page and f'<span class="system">{SOURCE}</span>' in page


def test_a_group_removed_at_the_provider_removes_the_membership_at_the_next_login(
    sso: OidcProvider, vision: Team
) -> None:
    sso.user_put("bruno", groups=["vision-team"])
    sign_in(Client(), "bruno")
    bruno = User.objects.get(username="bruno")
    assert Membership.objects.filter(user=bruno, team=vision).exists()

    sso.user_put("bruno", groups=[])
    client = Client()
    assert sign_in(client, "bruno").status_code == 302

    assert User.objects.filter(username="bruno").count() == 1
    assert not Membership.objects.filter(user=bruno).exists()
    removed = AuditEvent.objects.get(kind=AuditEvent.Kind.MEMBER_REMOVED)
    assert (removed.team, removed.source, removed.actor) == (vision, SOURCE, None)
    assert client.get(f"/teams/{vision.slug}/").status_code == 404


def test_a_refused_login_says_why_on_the_login_page_and_counts_for_no_lockout(settings: Any, sso: OidcProvider) -> None:
    settings.AXES_FAILURE_LIMIT = 2
    UserFactory(username="carol")  # a password account Fleetline already has
    sso.user_put("carol", groups=["ml-admins"])
    client = Client()

    for _ in range(3):
        response = sign_in(client, "carol")
        assert response.status_code == 302 and response["Location"] == "/login/"

    page = client.get("/login/").content.decode()
    assert "Fleetline already has an account named carol that is not linked to this sign-on" in page
    assert "_auth_user_id" not in client.session
    assert not AccessAttempt.objects.exists()
    # The password still logs carol in: her account was not touched.
    assert client.post("/login/", {"username": "carol", "password": PASSWORD}).status_code == 302
    assert not is_fleet_admin(User.objects.get(username="carol"))


def test_wrong_passwords_still_lock_out_while_single_sign_on_is_on(settings: Any, sso: OidcProvider) -> None:
    settings.AXES_FAILURE_LIMIT = 2
    UserFactory(username="dora")
    client = Client()
    statuses = [client.post("/login/", {"username": "dora", "password": "wrong"}).status_code for _ in range(2)]
    assert statuses == [200, 429]
    assert client.post("/login/", {"username": "dora", "password": PASSWORD}).status_code == 429


def test_a_deactivated_account_is_logged_out_and_cannot_sign_in_again(sso: OidcProvider, vision: Team) -> None:
    sso.user_put("erin", groups=["vision-team"])
    client = Client()
    sign_in(client, "erin")
    assert client.get("/").status_code == 200
    User.objects.filter(username="erin").update(is_active=False)

    assert client.get("/")["Location"].startswith("/login/")
    assert sign_in(client, "erin")["Location"] == "/login/"
    assert "deactivated" in client.get("/login/").content.decode()


def test_a_provider_that_cannot_be_reached_sends_people_back_to_the_password_form(settings: Any) -> None:
    settings.FLEETLINE_OIDC = oidc_config_from_env(
        {
            "FLEETLINE_OIDC_ISSUER": "http://127.0.0.1:9/nowhere",
            "FLEETLINE_OIDC_CLIENT_ID": "fleetline",
            "FLEETLINE_OIDC_CLIENT_SECRET": SECRET,
            "FLEETLINE_OIDC_TIMEOUT_S": "2",
        }
    )
    client = Client()
    response = client.get("/oidc/authenticate/")
    assert response.status_code == 302 and response["Location"] == "/login/"
    assert "single sign-on cannot be reached" in client.get("/login/").content.decode()
