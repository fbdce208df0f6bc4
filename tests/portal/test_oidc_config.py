"""Single sign-on's settings: off without FLEETLINE_OIDC_*, and once any is set, checked whole when
the process starts, each mistake named."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from portal.oidc_config import oidc_config_from_env

ROOT = Path(__file__).resolve().parents[2]
BASE = {
    "FLEETLINE_OIDC_ISSUER": "https://idp.example.org/realms/acme",
    "FLEETLINE_OIDC_CLIENT_ID": "fleetline",
    "FLEETLINE_OIDC_CLIENT_SECRET": "s3cret",
}


def test_it_is_off_without_any_setting_and_blank_ones_count_as_unset() -> None:
    assert oidc_config_from_env({"PATH": "/bin"}) is None
    assert oidc_config_from_env({"FLEETLINE_OIDC_CLIENT_ID": " "}) is None


def test_the_defaults_of_a_provider_named_by_its_issuer() -> None:
    config = oidc_config_from_env(BASE)
    assert config is not None
    assert (config.provider_name, config.scopes, config.username_claim, config.groups_claim) == (
        "single sign-on",
        "openid email profile",
        "preferred_username",
        "groups",
    )
    assert config.discovery_url == "https://idp.example.org/realms/acme/.well-known/openid-configuration"
    assert (config.sign_algorithm, config.link_existing, config.timeout_s, bool(config.group_map)) == (
        "RS256",
        False,
        10.0,
        False,
    )


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"FLEETLINE_OIDC_CLIENT_SECRET": ""}, "needs FLEETLINE_OIDC_CLIENT_SECRET"),
        (
            {"FLEETLINE_OIDC_ISSUER": "", "FLEETLINE_OIDC_TOKEN_ENDPOINT": "https://idp/token"},
            "needs FLEETLINE_OIDC_AUTHORIZATION_ENDPOINT, FLEETLINE_OIDC_USERINFO_ENDPOINT, "
            "FLEETLINE_OIDC_JWKS_ENDPOINT",
        ),
        ({"FLEETLINE_OIDC_SIGN_ALGORITHM": "none"}, "FLEETLINE_OIDC_SIGN_ALGORITHM must be one of RS256"),
        ({"FLEETLINE_OIDC_SCOPES": "email profile"}, "FLEETLINE_OIDC_SCOPES must include openid"),
        ({"FLEETLINE_OIDC_TIMEOUT_S": "soon"}, "FLEETLINE_OIDC_TIMEOUT_S must be a number of seconds"),
        ({"FLEETLINE_OIDC_GROUP_MAP": "admins=role:root"}, "FLEETLINE_OIDC_GROUP_MAP entry 'admins=role:root'"),
    ],
)
def test_each_mistake_is_named(change: dict[str, str], says: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=says):
        oidc_config_from_env({**BASE, **change})


def test_hs256_needs_no_key_set_endpoint() -> None:
    endpoints = {
        f"FLEETLINE_OIDC_{name}_ENDPOINT": f"https://idp/{name}" for name in ("AUTHORIZATION", "TOKEN", "USERINFO")
    }
    config = oidc_config_from_env(
        {**BASE, "FLEETLINE_OIDC_ISSUER": "", "FLEETLINE_OIDC_SIGN_ALGORITHM": "HS256", **endpoints}
    )
    assert config is not None and config.jwks_endpoint == ""


def test_a_bad_group_map_stops_the_process_at_start_with_the_entry_named() -> None:
    env = {**os.environ, **BASE, "DEBUG": "1", "FLEETLINE_OIDC_GROUP_MAP": "ml-admins=role:admin,vision"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0
    assert "FLEETLINE_OIDC_GROUP_MAP entry 'vision': expected GROUP=TARGET" in result.stderr
