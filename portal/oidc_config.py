"""Single sign-on's settings, read from the environment when the settings load: on once
``FLEETLINE_OIDC_CLIENT_ID`` is set, and then checked whole (a missing endpoint or a group map
that does not parse stops the process with a message naming the variable). Imports no models:
the settings module uses it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured

from tenants.group_map import GroupMap, GroupMapError, group_map_parse

PREFIX = "FLEETLINE_OIDC_"
ENDPOINTS = ("AUTHORIZATION", "TOKEN", "USERINFO", "JWKS")
SIGN_ALGORITHMS = ("RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "HS256")


@dataclass(frozen=True, slots=True)
class OidcConfig:
    """One identity provider. Endpoints left empty are read from the issuer's discovery document
    (``{issuer}/.well-known/openid-configuration``) at the first login."""

    provider_name: str
    client_id: str
    client_secret: str
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    userinfo_endpoint: str
    jwks_endpoint: str
    scopes: str
    username_claim: str
    groups_claim: str
    group_map: GroupMap
    sign_algorithm: str
    link_existing: bool
    timeout_s: float

    @property
    def discovery_url(self) -> str:
        return f"{self.issuer.rstrip('/')}/.well-known/openid-configuration"


def _flag(value: str) -> bool:
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _float(environ: Mapping[str, str], name: str, default: float) -> float:
    raw = environ.get(PREFIX + name, "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        raise ImproperlyConfigured(f"{PREFIX}{name} must be a number of seconds, not {raw!r}") from None
    if not value > 0:
        raise ImproperlyConfigured(f"{PREFIX}{name} must be above 0, not {raw!r}")
    return value


def oidc_config_from_env(environ: Mapping[str, str]) -> OidcConfig | None:
    """The provider the environment configures, or None when no ``FLEETLINE_OIDC_*`` is set."""
    values = {name.removeprefix(PREFIX): value.strip() for name, value in environ.items() if name.startswith(PREFIX)}
    if not any(values.values()):
        return None
    algorithm = values.get("SIGN_ALGORITHM") or "RS256"
    if algorithm not in SIGN_ALGORITHMS:
        raise ImproperlyConfigured(f"{PREFIX}SIGN_ALGORITHM must be one of {', '.join(SIGN_ALGORITHMS)}")
    missing = [PREFIX + name for name in ("CLIENT_ID", "CLIENT_SECRET") if not values.get(name)]
    issuer = values.get("ISSUER", "")
    if not issuer:
        # HS256 tokens are checked with the client secret: no key set is needed then.
        needed = ENDPOINTS if not algorithm.startswith("HS") else ENDPOINTS[:3]
        missing += [f"{PREFIX}{name}_ENDPOINT" for name in needed if not values.get(f"{name}_ENDPOINT")]
    if missing:
        raise ImproperlyConfigured(
            f"Single sign-on needs {', '.join(missing)} ({PREFIX}ISSUER, or else the endpoints, name the provider)."
        )
    try:
        group_map = group_map_parse(values.get("GROUP_MAP", ""))
    except GroupMapError as error:
        raise ImproperlyConfigured(str(error)) from None
    scopes = values.get("SCOPES") or "openid email profile"
    if "openid" not in scopes.split():
        raise ImproperlyConfigured(f"{PREFIX}SCOPES must include openid, not {scopes!r}")
    return OidcConfig(
        provider_name=values.get("PROVIDER_NAME") or "single sign-on",
        client_id=values["CLIENT_ID"],
        client_secret=values["CLIENT_SECRET"],
        issuer=issuer,
        authorization_endpoint=values.get("AUTHORIZATION_ENDPOINT", ""),
        token_endpoint=values.get("TOKEN_ENDPOINT", ""),
        userinfo_endpoint=values.get("USERINFO_ENDPOINT", ""),
        jwks_endpoint=values.get("JWKS_ENDPOINT", ""),
        scopes=scopes,
        username_claim=values.get("USERNAME_CLAIM") or "preferred_username",
        groups_claim=values.get("GROUPS_CLAIM") or "groups",
        group_map=group_map,
        sign_algorithm=algorithm,
        link_existing=_flag(values.get("LINK_EXISTING", "")),
        timeout_s=_float(environ, "TIMEOUT_S", 10.0),
    )
