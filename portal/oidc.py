"""Single sign-on with OpenID Connect (mozilla-django-oidc): the login page's "Sign in with ..."
leads to the identity provider (authorization code flow with PKCE and a nonce); its answer comes
back to the callback, where the ID token is checked (signature, issuer, audience, expiry, nonce),
and `tenants.services.sso.sso_login` finds or creates the account and brings its mapped roles and
memberships up to date. Settings: ``settings.FLEETLINE_OIDC`` (`portal.oidc_config`); without it
these views answer 404 and the backend passes every login on. Password login stays beside it."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any

import httpx
import jwt
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import User
from django.core.exceptions import SuspiciousOperation, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import redirect
from django.urls import reverse
from django.views import View
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from portal.oidc_config import OidcConfig
from tenants.services.sso import SsoClaims, SsoLoginRefused, sso_login

logger = logging.getLogger(__name__)

USERNAME_MAX_LENGTH = 150  # django.contrib.auth's User.username


class OidcProviderUnreachable(Exception):
    """The provider's discovery document could not be read or does not describe it."""


@dataclass(frozen=True, slots=True)
class Endpoints:
    authorization: str
    token: str
    userinfo: str
    jwks: str


@functools.lru_cache(maxsize=4)
def _discovery(url: str, issuer: str, timeout_s: float) -> dict[str, Any]:
    """The provider's discovery document, read once per process (a failure is not kept)."""
    try:
        response = httpx.get(url, timeout=timeout_s)
        response.raise_for_status()
        document: dict[str, Any] = response.json()
    except (httpx.HTTPError, ValueError) as error:
        raise OidcProviderUnreachable(f"could not read {url}: {error}") from error
    if str(document.get("issuer", "")).rstrip("/") != issuer.rstrip("/"):
        raise OidcProviderUnreachable(f"{url} describes issuer {document.get('issuer')!r}, not {issuer!r}")
    return document


def endpoints_for(config: OidcConfig) -> Endpoints:
    """The configured endpoints, those left empty taken from the issuer's discovery document."""
    given = (config.authorization_endpoint, config.token_endpoint, config.userinfo_endpoint, config.jwks_endpoint)
    if all(given) or not config.issuer:
        return Endpoints(*given)
    document = _discovery(config.discovery_url, config.issuer, config.timeout_s)
    keys = ("authorization_endpoint", "token_endpoint", "userinfo_endpoint", "jwks_uri")
    return Endpoints(*(value or str(document.get(key, "")) for value, key in zip(given, keys, strict=True)))


def _config() -> OidcConfig:
    config: OidcConfig | None = settings.FLEETLINE_OIDC
    if config is None:
        raise Http404("Single sign-on is not configured.")
    return config


def oidc_setting(attr: str, *default: Any) -> Any:
    """mozilla-django-oidc's settings, answered from ``FLEETLINE_OIDC``."""
    config = _config()
    fixed: dict[str, Any] = {
        "OIDC_RP_CLIENT_ID": config.client_id,
        "OIDC_RP_CLIENT_SECRET": config.client_secret,
        "OIDC_RP_SCOPES": config.scopes,
        "OIDC_RP_SIGN_ALGO": config.sign_algorithm,
        "OIDC_RP_IDP_SIGN_KEY": None,
        "OIDC_USE_PKCE": True,
        "OIDC_USE_NONCE": True,
        "OIDC_TIMEOUT": config.timeout_s,
        "OIDC_CREATE_USER": True,
        "LOGIN_REDIRECT_URL_FAILURE": reverse("login"),
    }
    if attr in fixed:
        return fixed[attr]
    return import_from_settings(attr, *default)


def _claim_text(claims: dict[str, Any], name: str) -> str:
    value = claims.get(name)
    return value.strip() if isinstance(value, str) else ""


def sso_claims_read(claims: dict[str, Any], config: OidcConfig) -> SsoClaims:
    """The login's person as the service takes it; refuses a username Fleetline cannot use and
    a groups claim that is not a list of names. An absent groups claim is no groups."""
    subject = _claim_text(claims, "sub")
    if not subject:
        raise SsoLoginRefused("The identity provider named no subject (sub) for this login.")
    username = _claim_text(claims, config.username_claim)
    try:
        User.username_validator(username)
        if not username or len(username) > USERNAME_MAX_LENGTH:
            raise ValidationError("length")
    except ValidationError:
        raise SsoLoginRefused(
            f"The identity provider's {config.username_claim} ({username or 'none'}) is not a Fleetline "
            f"username: letters, digits and @ . + - _, at most {USERNAME_MAX_LENGTH}."
        ) from None
    groups = claims.get(config.groups_claim, [])
    if isinstance(groups, str):
        groups = [groups]
    if not isinstance(groups, list) or not all(isinstance(group, str) for group in groups):
        raise SsoLoginRefused(f"The identity provider's {config.groups_claim} claim is not a list of group names.")
    return SsoClaims(
        issuer=_claim_text(claims, "iss") or config.issuer,
        subject=subject,
        username=username,
        email=_claim_text(claims, "email"),
        groups=frozenset(groups),
    )


class OidcBackend(OIDCAuthenticationBackend):
    """Authenticates the provider's answer at the callback, and no other login."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Django makes a backend for every login, password ones too: nothing is read here.
        self.UserModel = User

    get_settings = staticmethod(oidc_setting)

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> User | None:
        config: OidcConfig | None = settings.FLEETLINE_OIDC
        if config is None or request is None or "nonce" not in kwargs:
            return None  # not the callback: a password login, say
        endpoints = endpoints_for(config)
        self.config = config
        self.OIDC_OP_TOKEN_ENDPOINT = endpoints.token
        self.OIDC_OP_USER_ENDPOINT = endpoints.userinfo
        self.OIDC_OP_JWKS_ENDPOINT = endpoints.jwks or None
        self.OIDC_RP_CLIENT_ID = config.client_id
        self.OIDC_RP_CLIENT_SECRET = config.client_secret
        self.OIDC_RP_SIGN_ALGO = config.sign_algorithm
        self.OIDC_RP_IDP_SIGN_KEY = None
        user: User | None = super().authenticate(request, **kwargs)
        return user

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        """The library checks the signature, expiry and nonce; the audience and issuer too."""
        try:
            payload: dict[str, Any] = super().verify_token(token, **kwargs)
        except jwt.InvalidTokenError as error:  # expired, say: the library lets all but DecodeError through
            raise SuspiciousOperation(f"The ID token is not valid: {error}") from error
        audience = payload.get("aud")
        audiences = [audience] if isinstance(audience, str) else list(audience or [])
        if self.config.client_id not in audiences:
            raise SuspiciousOperation("The ID token was issued to another client.")
        issuer = str(payload.get("iss", "")).rstrip("/")
        if self.config.issuer and issuer != self.config.issuer.rstrip("/"):
            raise SuspiciousOperation(f"The ID token's issuer {issuer!r} is not {self.config.issuer!r}.")
        return payload

    def get_userinfo(self, access_token: str, id_token: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The ID token's claims with the userinfo endpoint's on top, for the same subject."""
        info: dict[str, Any] = super().get_userinfo(access_token, id_token, payload)
        if info.get("sub") != payload.get("sub"):
            raise SuspiciousOperation("The userinfo endpoint answered for another subject than the ID token's.")
        return {**payload, **info, "iss": payload.get("iss", ""), "sub": payload.get("sub")}

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]) -> User | None:
        claims = self.get_userinfo(access_token, id_token, payload)
        try:
            return sso_login(
                claims=sso_claims_read(claims, self.config),
                group_map=self.config.group_map,
                link_existing=self.config.link_existing,
            )
        except SsoLoginRefused as refusal:
            logger.warning("Single sign-on of %s refused: %s", claims.get("sub"), refusal)
            messages.error(self.request, str(refusal))
            return None

    def get_user(self, user_id: int) -> User | None:
        # The library's own answers for a deactivated user too; Django's refuses them.
        user: User | None = ModelBackend.get_user(self, user_id)
        return user


def _failed(request: HttpRequest, config: OidcConfig) -> HttpResponse:
    if not len(messages.get_messages(request)):
        messages.error(
            request, f"Signing in with {config.provider_name} did not complete. Try again, or log in with a password."
        )
    return redirect("login")


class OidcAuthenticateView(OIDCAuthenticationRequestView):
    """Sends the browser to the provider's authorization endpoint."""

    def __init__(self, **kwargs: Any) -> None:
        View.__init__(self, **kwargs)  # the endpoints are read per request, once configured

    get_settings = staticmethod(oidc_setting)

    def get(self, request: HttpRequest) -> HttpResponseBase:
        config = _config()
        try:
            self.OIDC_OP_AUTH_ENDPOINT = endpoints_for(config).authorization
        except OidcProviderUnreachable:
            logger.warning("Single sign-on could not start", exc_info=True)
            messages.error(request, f"{config.provider_name} cannot be reached. Try again, or log in with a password.")
            return redirect("login")
        self.OIDC_RP_CLIENT_ID = config.client_id
        response: HttpResponseBase = super().get(request)
        return response


class OidcCallbackView(OIDCAuthenticationCallbackView):
    """The provider's answer: logs the user in, or back to the login page saying why not."""

    get_settings = staticmethod(oidc_setting)

    def get(self, request: HttpRequest) -> HttpResponseBase:
        config = _config()
        try:
            response: HttpResponseBase = super().get(request)
        except (OSError, OidcProviderUnreachable):  # requests' errors (the token call) are OSErrors
            logger.warning("Single sign-on could not reach the provider", exc_info=True)
            return _failed(request, config)
        except SuspiciousOperation as refusal:  # a state, nonce, signature or token that does not check out
            logger.warning("Single sign-on refused an answer: %s", refusal)
            return _failed(request, config)
        return response

    def login_failure(self) -> HttpResponse:
        return _failed(self.request, _config())


class LoginView(auth_views.LoginView):
    """The password form, and "Sign in with <provider>" beside it when single sign-on is on."""

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        config: OidcConfig | None = settings.FLEETLINE_OIDC
        context["sso_provider"] = config.provider_name if config is not None else ""
        return context


def axes_exempt(request: HttpRequest, credentials: dict[str, Any] | None = None) -> bool:
    """django-axes counts wrong passwords; the provider guards its own logins, so the callback
    neither counts nor is refused by a lockout."""
    return request.path == reverse("oidc_authentication_callback")
