"""What schemathesis found through the real servers, fed again deterministically: a multipart body
with no part in it, or no boundary, to the endpoints that take form uploads is a 4xx in the API's
error shape from ``make run``'s server (daphne) and from the production one (uvicorn), and writes
nothing. Twisted, under daphne, used to parse such a body itself and answer a bare 400 (no body,
no content type) before the application saw it."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from api.services import api_token_create
from portal.management.commands.up import Command as Up
from simulations.models import Simulation
from tenants.models import QuotaRequest
from tests.api.conftest import People
from tests.django_fixtures import ROOT
from tests.factories import QuotaRequestFactory

# Bodies that are no multipart Twisted can read: empty of parts, only a closing delimiter, no
# boundary at all, and the truly empty body (which Twisted never looked at).
EMPTY_MULTIPART = [
    ("multipart/form-data; boundary=xyz", b"\r\n"),
    ("multipart/form-data; boundary=xyz", b"--xyz--\r\n"),
    ("multipart/form-data", b"--"),
    ("multipart/form-data", b"\r\n"),
    ("multipart/form-data; boundary=xyz", b""),
]
PATHS = ["/api/v1/quota-requests/", "/api/v1/simulations/", "/api/v1/quota-requests/{id}/reject/"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def make_run_web_argv(port: int) -> list[str]:
    """The web server ``manage.py up`` (``make run``) starts."""
    (web,) = [child for child in Up()._children(host="127.0.0.1", port=port) if child.name == "web"]
    return web.argv


def uvicorn_argv(port: int) -> list[str]:
    return [sys.executable, "-m", "uvicorn", "--host", "127.0.0.1", "--port", str(port), "portal.asgi:application"]


@pytest.fixture(params=["make run (daphne)", "production (uvicorn)"])
def server_port(request: pytest.FixtureRequest, subprocess_env: dict[str, str]) -> Iterator[int]:
    port = _free_port()
    argv = make_run_web_argv(port) if request.param.startswith("make run") else uvicorn_argv(port)
    process = subprocess.Popen(argv, cwd=ROOT, env=subprocess_env, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"{request.param} did not come up")
            time.sleep(0.1)
    yield port
    process.terminate()
    process.wait(timeout=10)


def _post(port: int, path: str, *, token: str, content_type: str, body: bytes) -> tuple[int, str, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request(
            "POST", path, body=body, headers={"Authorization": f"Bearer {token}", "Content-Type": content_type}
        )
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type") or "", response.read()
    finally:
        connection.close()


def test_an_empty_multipart_body_is_a_4xx_in_the_error_shape_from_each_server(people: People, server_port: int) -> None:
    pending = QuotaRequestFactory(team=people.fleet.team, accelerator_type=people.fleet.accelerator)
    token = api_token_create(user=people.admin, name="fuzz").secret
    answers = {}
    for path in PATHS:
        for content_type, body in EMPTY_MULTIPART:
            status, answered_type, content = _post(
                server_port, path.format(id=pending.pk), token=token, content_type=content_type, body=body
            )
            answers[(path, content_type, body)] = (status, answered_type, content)

    for case, (status, answered_type, content) in answers.items():
        assert 400 <= status < 500, (case, status, content)
        assert answered_type.startswith("application/json"), (case, status, answered_type)
        error = json.loads(content)
        assert error["type"] in ("validation_error", "client_error"), (case, error)
        assert error["errors"] and all(set(one) == {"code", "detail", "attr"} for one in error["errors"]), case
    assert list(QuotaRequest.objects.values_list("pk", "state")) == [(pending.pk, QuotaRequest.State.PENDING)]
    assert not Simulation.objects.exists()
