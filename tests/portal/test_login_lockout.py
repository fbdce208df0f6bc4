"""Login lockout: after AXES_FAILURE_LIMIT wrong passwords for one username from one address, the
right password is refused too for the cool-off, with a clear page, and the audit log says so."""

from __future__ import annotations

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import F
from django.http import HttpResponse as Response
from django.test import Client

from tenants.models import AuditEvent
from tests.factories import PASSWORD, UserFactory

pytestmark = pytest.mark.django_db

LIMIT = settings.AXES_FAILURE_LIMIT


@pytest.fixture
def user() -> User:
    return UserFactory(username="ada")


def _log_in(client: Client, username: str, password: str) -> Response:
    return client.post("/login/", {"username": username, "password": password})


def _fail(client: Client, username: str, times: int) -> list[int]:
    return [_log_in(client, username, "wrong-password").status_code for _ in range(times)]


def test_the_limit_is_ten_failures_for_fifteen_minutes_by_username_and_address() -> None:
    assert (LIMIT, settings.AXES_COOLOFF_TIME) == (10, timedelta(minutes=15))
    assert settings.AXES_LOCKOUT_PARAMETERS == [["username", "ip_address"]]


def test_after_ten_wrong_passwords_the_right_one_is_refused_with_the_lockout_message(user: User) -> None:
    client = Client()
    # The login form answers each wrong password; the one that reaches the limit gets the lockout.
    assert _fail(client, "ada", LIMIT) == [200] * (LIMIT - 1) + [429]

    response = _log_in(client, "ada", PASSWORD)

    assert response.status_code == 429
    body = response.content.decode()
    assert "Too many wrong passwords for “ada” from your" in body and "locked for 15 minutes" in body
    assert "_auth_user_id" not in client.session


def test_the_lockout_is_in_the_audit_log_once(user: User) -> None:
    client = Client()
    _fail(client, "ada", LIMIT)
    _log_in(client, "ada", PASSWORD)
    _log_in(client, "ada", "wrong-again")

    event = AuditEvent.objects.get(kind=AuditEvent.Kind.LOGIN_LOCKED_OUT)
    assert event.actor is None
    assert event.object_repr == "Login of ada from 127.0.0.1"
    assert event.after == {"username": "ada", "ip_address": "127.0.0.1", "failures": LIMIT}


def test_one_failure_short_of_the_limit_the_right_password_logs_in_and_clears_the_count(user: User) -> None:
    client = Client()
    _fail(client, "ada", LIMIT - 1)

    assert _log_in(client, "ada", PASSWORD).status_code == 302
    assert not AccessAttempt.objects.filter(username="ada").exists()
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.LOGIN_LOCKED_OUT).exists()


def test_the_lockout_holds_only_that_username_from_that_address(user: User) -> None:
    UserFactory(username="grace")
    _fail(Client(), "ada", LIMIT)

    assert _log_in(Client(REMOTE_ADDR="10.0.0.2"), "ada", PASSWORD).status_code == 302
    assert _log_in(Client(), "grace", PASSWORD).status_code == 302
    assert _log_in(Client(), "ada", PASSWORD).status_code == 429


def test_the_right_password_works_again_once_the_cool_off_has_passed(user: User) -> None:
    client = Client()
    _fail(client, "ada", LIMIT)
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - settings.AXES_COOLOFF_TIME - timedelta(seconds=1))

    assert _log_in(client, "ada", PASSWORD).status_code == 302
