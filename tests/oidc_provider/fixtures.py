"""The test provider in a second process, for the single sign-on tests: `oidc_provider` starts it
on a free loopback port for the test session (a fresh database and signing key each time) and
stops it at the end; `OidcProvider` registers clients and users and changes users' groups between
logins; `provider_sign_in` is a person signing in at the provider without a browser."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "provider-password"


@dataclass(frozen=True)
class OidcProvider:
    base_url: str
    control_token: str

    @property
    def issuer(self) -> str:
        return f"{self.base_url}/o"

    def _post(self, path: str, body: dict[str, object]) -> None:
        response = httpx.post(
            f"{self.base_url}{path}", json=body, headers={"X-Control-Token": self.control_token}, timeout=10
        )
        response.raise_for_status()

    def client_put(self, *, client_id: str, client_secret: str, redirect_uris: Iterable[str]) -> None:
        self._post(
            "/control/clients/",
            {"client_id": client_id, "client_secret": client_secret, "redirect_uris": list(redirect_uris)},
        )

    def user_put(self, username: str, *, groups: Iterable[str], email: str = "") -> None:
        """Create the user, or set their groups (and e-mail) as they are from the next login on."""
        self._post(
            "/control/users/",
            {
                "username": username,
                "password": PASSWORD,
                "email": email or f"{username}@example.org",
                "groups": list(groups),
            },
        )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def oidc_provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OidcProvider]:
    port = _free_port()
    provider = OidcProvider(base_url=f"http://127.0.0.1:{port}", control_token=secrets.token_urlsafe(16))
    env = {
        **os.environ,
        "OIDC_PROVIDER_DB": str(tmp_path_factory.mktemp("oidc-provider") / "provider.sqlite3"),
        "OIDC_PROVIDER_ISSUER": provider.issuer,
        "OIDC_PROVIDER_CONTROL_TOKEN": provider.control_token,
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    process = subprocess.Popen([sys.executable, "-m", "tests.oidc_provider.serve", str(port)], cwd=ROOT, env=env)
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(f"{provider.issuer}/.well-known/openid-configuration", timeout=1).raise_for_status()
            break
        except httpx.HTTPError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail("the test OpenID Connect provider did not come up")
            time.sleep(0.1)
    yield provider
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


def provider_sign_in(authorize_url: str, username: str, *, password: str = PASSWORD) -> str:
    """Follow the authorization request through the provider's login form, as a person would;
    return the address the provider sends the browser back to (the client's callback, with the
    code and state)."""
    with httpx.Client(timeout=10) as client:
        login_page = client.get(authorize_url, follow_redirects=True)
        login_page.raise_for_status()
        csrf = client.cookies["provider_csrftoken"]
        answer = client.post(
            str(login_page.url),
            data={
                "csrfmiddlewaretoken": csrf,
                "username": username,
                "password": password,
                "next": login_page.url.params["next"],
            },
        )
        while answer.is_redirect:
            location = urljoin(str(answer.url), answer.headers["location"])
            if not location.startswith(str(answer.url.copy_with(path="/", query=None, fragment=None))):
                return location  # leaving the provider: back to the client
            answer = client.get(location)
        raise AssertionError(f"the provider did not send the browser back: {answer.status_code} {answer.text[:300]}")
