"""Single sign-on in a real browser against a real OpenID Connect provider on loopback
(`tests.oidc_provider`, django-oauth-toolkit in a second process): a person signs in at the
provider's own login page and lands on the dashboard as what the provider's groups map to; a
group removed at the provider takes the membership away at the next login, and the open team
page's live socket is closed at once."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Browser, Page, WebSocket, expect

from tenants.models import AuditEvent, Membership, Team
from tests.factories import TeamFactory
from tests.oidc_provider.fixtures import PASSWORD, OidcProvider

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SECRET = "fleetline-browser-client-secret"


@pytest.fixture
def subprocess_env(subprocess_env: dict[str, str], oidc_provider: OidcProvider) -> dict[str, str]:
    """The web server's environment, with single sign-on at the test provider."""
    return {
        **subprocess_env,
        "FLEETLINE_OIDC_PROVIDER_NAME": "Test IdP",
        "FLEETLINE_OIDC_ISSUER": oidc_provider.issuer,
        "FLEETLINE_OIDC_CLIENT_ID": "fleetline-browser",
        "FLEETLINE_OIDC_CLIENT_SECRET": SECRET,
        "FLEETLINE_OIDC_SCOPES": "openid profile email groups",
        "FLEETLINE_OIDC_GROUP_MAP": "ml-admins=role:admin,vision-team=team:vision:lead",
    }


@pytest.fixture
def site(asgi_server: str, oidc_provider: OidcProvider) -> str:
    oidc_provider.client_put(
        client_id="fleetline-browser", client_secret=SECRET, redirect_uris=[f"{asgi_server}/oidc/callback/"]
    )
    return asgi_server


@pytest.fixture
def csp_violations(page: Page) -> Iterator[list[str]]:
    seen: list[str] = []
    page.on("console", lambda message: seen.append(message.text) if "Content Security Policy" in message.text else None)
    yield seen


def sso_sign_in(page: Page, site: str, username: str, next_path: str = "/") -> None:
    """From Fleetline's login page through the provider's, back to ``next_path`` (the dashboard)."""
    page.goto(f"{site}/login/" + (f"?next={next_path}" if next_path != "/" else ""))
    page.get_by_role("link", name="Sign in with Test IdP").click()
    expect(page.get_by_role("heading", name="Test identity provider")).to_be_visible()
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("#provider-login")
    page.wait_for_url(lambda url: url.startswith(site) and "/oidc/" not in url, timeout=30_000)
    # Back at Fleetline: on the page asked for, or on the login page saying why not.
    assert page.url == f"{site}{next_path}", page.locator(".messages").all_inner_texts()


def wait_closed(socket: WebSocket, page: Page, timeout_s: float) -> float:
    """Seconds until the socket closed."""
    started = time.monotonic()
    while not socket.is_closed():
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"the socket was still open after {timeout_s} s")
        page.wait_for_timeout(50)
    return time.monotonic() - started


def test_sign_in_at_the_provider_then_a_removed_group_takes_the_team_and_closes_its_socket(
    site: str,
    oidc_provider: OidcProvider,
    browser: Browser,
    page: Page,
    csp_violations: list[str],
) -> None:
    vision: Team = TeamFactory(name="Vision", slug="vision")
    oidc_provider.user_put("alice", groups=["vision-team", "ml-admins"])

    sso_sign_in(page, site, "alice")
    expect(page.locator(".topbar .who")).to_have_text("alice")
    expect(page.get_by_role("link", name="Audit")).to_be_visible()  # a fleet admin, from ml-admins
    with page.expect_websocket() as opened:
        page.goto(f"{site}/teams/{vision.slug}/")
    team_socket = opened.value
    expect(page.locator("body")).to_have_attribute("data-live", "open")
    expect(page.locator("#member-list")).to_contain_text("alice")
    alice = User.objects.get(username="alice")
    assert Membership.objects.get(user=alice, team=vision).role == Membership.Role.LEAD

    # At the provider, alice leaves vision-team; she signs in again elsewhere (another browser).
    oidc_provider.user_put("alice", groups=["ml-admins"])
    assert not team_socket.is_closed()
    other: Any = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        elsewhere = other.new_page()
        sso_sign_in(elsewhere, site, "alice", next_path="/admin-portal/audit/")
        closed_after_s = wait_closed(team_socket, page, timeout_s=5)
        assert not Membership.objects.filter(user=alice).exists()
        removed = elsewhere.locator("#audit-events tr", has_text="Member removed")
        expect(removed).to_contain_text("single sign-on")
        expect(removed).to_contain_text("alice in Vision")
    finally:
        other.close()

    # The open page reconnects with what alice may read now.
    expect(page.locator("body")).to_have_attribute("data-live", "open")
    assert closed_after_s < 5
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.MEMBER_REMOVED, source="single sign-on").count() == 1
    assert csp_violations == []
