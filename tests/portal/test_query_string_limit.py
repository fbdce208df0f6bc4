"""Over-long query strings get a 414 response, never a silently closed connection.

Django refuses query strings above 8 kB. Behind that, the two ASGI servers differ: uvicorn (the
production server) passes a 30 kB query string on, so Django answers 414; daphne (Twisted) drops
the connection without a response once the request line passes 16,384 bytes, before Django sees
the request. These tests run both servers as real processes and pin that down."""

from __future__ import annotations

import http.client
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from django.test import Client

from portal.middleware import MAX_QUERY_STRING_BYTES
from tests.django_fixtures import ROOT

SERVERS = {
    "uvicorn": ["-m", "uvicorn", "--host", "127.0.0.1", "--port", "{port}", "portal.asgi:application"],
    "daphne": ["-m", "daphne", "-b", "127.0.0.1", "-p", "{port}", "portal.asgi:application"],
}
TWISTED_LINE_LIMIT = 16_384


def _get(port: int, query_bytes: int) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", "/login/?q=" + "a" * (query_bytes - 2))
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(params=list(SERVERS))
def server(request: pytest.FixtureRequest, subprocess_env: dict[str, str]) -> Iterator[tuple[str, int]]:
    """One ASGI server serving the application; yields its name and port."""
    port = _free_port()
    argv = [sys.executable, *(part.format(port=port) for part in SERVERS[request.param])]
    process = subprocess.Popen(argv, cwd=ROOT, env=subprocess_env, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"{request.param} did not come up")
            time.sleep(0.1)
    yield request.param, port
    process.terminate()
    process.wait(timeout=10)


def test_a_query_string_over_the_limit_is_refused_with_414_and_a_reason(db: None) -> None:
    client = Client()

    refused = client.get("/login/", {"q": "a" * MAX_QUERY_STRING_BYTES})
    accepted = client.get("/login/", {"q": "a" * (MAX_QUERY_STRING_BYTES - 2)})

    assert refused.status_code == 414
    assert f"this site takes at most {MAX_QUERY_STRING_BYTES:,}" in refused.content.decode()
    assert accepted.status_code == 200


def test_each_server_answers_414_for_long_query_strings_and_daphne_drops_a_line_past_16_kb(
    server: tuple[str, int],
) -> None:
    name, port = server

    status, body = _get(port, 12_000)

    assert status == 414
    assert "12,000 bytes long" in body
    assert _get(port, 1_000)[0] == 200
    if name == "uvicorn":
        assert _get(port, 30_000)[0] == 414
    else:
        # Twisted's LineReceiver drops a request line over its MAX_LENGTH with no response:
        # the reason production serves through uvicorn.
        with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
            _get(port, TWISTED_LINE_LIMIT + 100)
