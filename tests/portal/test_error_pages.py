"""Not-found and forbidden pages sit inside the site's layout, with its navigation."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied
from django.test import Client, RequestFactory
from django.views.defaults import permission_denied, server_error

from tests.factories import MembershipFactory

pytestmark = pytest.mark.django_db


def test_a_missing_or_other_teams_page_answers_404_inside_the_layout(settings: object) -> None:
    settings.DEBUG = False  # type: ignore[attr-defined]
    client = Client()
    client.force_login(MembershipFactory().user)

    response = client.get("/jobs/999999/")
    page = response.content.decode()
    assert response.status_code == 404
    assert "Not found" in page and 'href="/jobs/"' in page and "Log out" in page


def test_a_forbidden_action_answers_403_inside_the_layout() -> None:
    request = RequestFactory().get("/")
    request.user = MembershipFactory().user
    response = permission_denied(request, PermissionDenied())
    page = response.content.decode()
    assert response.status_code == 403
    assert "Not allowed" in page and 'href="/fleet/"' in page


def test_a_server_error_page_renders_without_a_request_context() -> None:
    response = server_error(RequestFactory().get("/"))
    assert response.status_code == 500
    assert "Something went wrong" in response.content.decode()
