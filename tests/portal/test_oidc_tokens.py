"""The callback trusts an ID token only when it is signed by the provider, unexpired, for this
client, from the configured issuer and with this login's nonce; a state that does not match any
login started here sends the person back to the login page, logged out."""

from __future__ import annotations

import time
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.core.exceptions import SuspiciousOperation
from django.test import Client

from portal.oidc import OidcBackend, sso_claims_read
from portal.oidc_config import oidc_config_from_env
from tenants.services.sso import SsoLoginRefused

ISSUER = "https://idp.example.org/realms/acme"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
PUBLIC_PEM = KEY.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


@pytest.fixture
def backend(settings: Any) -> OidcBackend:
    settings.FLEETLINE_OIDC = oidc_config_from_env(
        {"FLEETLINE_OIDC_ISSUER": ISSUER, "FLEETLINE_OIDC_CLIENT_ID": "fleetline", "FLEETLINE_OIDC_CLIENT_SECRET": "s"}
    )
    backend = OidcBackend()
    backend.config = settings.FLEETLINE_OIDC
    backend.OIDC_RP_SIGN_ALGO = "RS256"
    backend.OIDC_RP_IDP_SIGN_KEY = PUBLIC_PEM
    return backend


def token(**changes: Any) -> str:
    key = changes.pop("key", KEY)
    claims = {"iss": ISSUER, "aud": "fleetline", "sub": "s-1", "nonce": "n-1", "exp": time.time() + 60, **changes}
    return jwt.encode(claims, key, algorithm="RS256")


def test_a_good_token_passes_with_the_audience_as_a_list_too(backend: OidcBackend) -> None:
    assert backend.verify_token(token(), nonce="n-1")["sub"] == "s-1"
    assert backend.verify_token(token(aud=["other", "fleetline"]), nonce="n-1")["sub"] == "s-1"


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"aud": "another-client"}, "issued to another client"),
        ({"iss": "https://evil.example.org"}, "issuer 'https://evil.example.org'"),
        ({"exp": time.time() - 600}, "not valid: Signature has expired"),
        ({"nonce": "replayed"}, "Nonce verification failed"),
        ({"key": rsa.generate_private_key(public_exponent=65537, key_size=2048)}, "verification failed"),
    ],
)
def test_a_token_that_does_not_check_out_is_refused(backend: OidcBackend, changes: dict[str, Any], says: str) -> None:
    with pytest.raises(SuspiciousOperation, match=says):
        backend.verify_token(token(**changes), nonce="n-1")


def test_an_answer_for_no_login_started_here_goes_back_to_the_login_page(settings: Any, db: None) -> None:
    settings.FLEETLINE_OIDC = oidc_config_from_env(
        {
            "FLEETLINE_OIDC_CLIENT_ID": "fleetline",
            "FLEETLINE_OIDC_CLIENT_SECRET": "s",
            **{
                f"FLEETLINE_OIDC_{name}_ENDPOINT": "http://127.0.0.1:9/x"
                for name in ("AUTHORIZATION", "TOKEN", "USERINFO", "JWKS")
            },
        }
    )
    client = Client()
    client.get("/oidc/authenticate/")  # a login started: the session holds its state

    response = client.get("/oidc/callback/", {"code": "c", "state": "forged"})

    assert response.status_code == 302 and response["Location"] == "/login/"
    assert "did not complete" in client.get("/login/").content.decode()
    assert "_auth_user_id" not in client.session


CONFIG = oidc_config_from_env(
    {"FLEETLINE_OIDC_ISSUER": ISSUER, "FLEETLINE_OIDC_CLIENT_ID": "fleetline", "FLEETLINE_OIDC_CLIENT_SECRET": "s"}
)


def test_claims_give_the_subject_username_email_and_groups() -> None:
    assert CONFIG is not None
    claims = sso_claims_read(
        {"iss": ISSUER, "sub": "s-1", "preferred_username": "ada.l", "email": "ada@example.org", "groups": ["a", "b"]},
        CONFIG,
    )
    assert (claims.subject, claims.username, claims.email, claims.groups) == (
        "s-1",
        "ada.l",
        "ada@example.org",
        frozenset({"a", "b"}),
    )
    # One group as a string is one group; no groups claim is no groups.
    assert sso_claims_read({"sub": "s", "preferred_username": "a", "groups": "a"}, CONFIG).groups == {"a"}
    assert sso_claims_read({"sub": "s", "preferred_username": "a"}, CONFIG).groups == frozenset()


@pytest.mark.parametrize(
    ("claims", "says"),
    [
        ({"preferred_username": "ada"}, "named no subject"),
        ({"sub": "s"}, r"preferred_username \(none\) is not a Fleetline username"),
        ({"sub": "s", "preferred_username": "ada lovelace"}, r"\(ada lovelace\) is not a Fleetline username"),
        ({"sub": "s", "preferred_username": "a" * 151}, "at most 150"),
        ({"sub": "s", "preferred_username": "ada", "groups": {"a": 1}}, "groups claim is not a list of group names"),
        ({"sub": "s", "preferred_username": "ada", "groups": ["a", 2]}, "groups claim is not a list of group names"),
    ],
)
def test_claims_fleetline_cannot_use_refuse_the_login_saying_why(claims: dict[str, Any], says: str) -> None:
    assert CONFIG is not None
    with pytest.raises(SsoLoginRefused, match=says):
        sso_claims_read(claims, CONFIG)
