"""The production layout as the README runs it: ``honcho start`` on the Procfile with the
production settings, on the test database and the tests' Redis. Two uvicorn workers serve HTTPS
(behind a proxy header) only, two Celery workers answer, and beat drives the fleet feed through
them to the channel layer."""

from __future__ import annotations

import asyncio
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from email.message import Message
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from honcho.environ import parse_procfile

from core.groups import FLEET_GROUP
from portal.celery import app

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
HTTPS = {"X-Forwarded-Proto": "https"}  # what the TLS-terminating proxy adds


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, Message]:
    """Status and headers (looked up by any case) of one GET, not following redirects."""
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, headers=headers or {}), timeout=5) as response:
            return int(response.status), response.headers
    except urllib.error.HTTPError as error:
        return error.code, error.headers
    except OSError:
        return 0, Message()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_procfile_lists_the_queues_the_settings_route_to() -> None:
    worker = parse_procfile((ROOT / "Procfile").read_text()).processes["worker"]
    assert re.search(r"-Q (\S+)", worker).group(1) == settings.CELERY_WORKER_QUEUES  # type: ignore[union-attr]


@pytest.mark.django_db(transaction=True)
def test_honcho_runs_the_production_layout_on_https_with_two_workers_and_beat(
    subprocess_env: dict[str, str],
) -> None:
    var_dir = Path(tempfile.mkdtemp(prefix="fl-prod-"))
    port = _free_port()
    env = {
        **subprocess_env,
        "DJANGO_SETTINGS_MODULE": "portal.settings_production",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_PROXY_SSL_HEADER": "HTTP_X_FORWARDED_PROTO,https",
        "FLEETLINE_VAR_DIR": str(var_dir),
        "PATH": f"{VENV_BIN}:{subprocess_env.get('PATH', '')}",
        "PORT": str(port),
        "HOST": "127.0.0.1",
        "WEB_CONCURRENCY": "2",
        "WORKER_CONCURRENCY": "1",
    }
    app.control.purge()
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(FLEET_GROUP, channel)
    log = var_dir / "honcho.log"
    with open(log, "wb") as out:
        honcho = subprocess.Popen(
            [str(VENV_BIN / "honcho"), "start", "--no-colour", "-c", "web=1,worker=2,beat=1"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 90
        while _get(f"http://127.0.0.1:{port}/login/", HTTPS)[0] != 200:
            assert honcho.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)

        status, headers = _get(f"http://127.0.0.1:{port}/login/")
        assert (status, headers["Location"]) == (301, f"https://127.0.0.1:{port}/login/")
        status, headers = _get(f"http://127.0.0.1:{port}/login/", HTTPS)
        assert headers["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains"
        assert "; secure" in headers["Set-Cookie"].lower()
        status, headers = _get(f"http://127.0.0.1:{port}/api/v1/jobs/", HTTPS)
        assert (status, headers["WWW-Authenticate"]) == (401, "Bearer")

        replies: list[dict[str, Any]] = []
        while len(replies) < 2:
            assert honcho.poll() is None and time.monotonic() < deadline, log.read_text()
            replies = app.control.ping(timeout=1.0)
        assert sorted(name.split("@")[0] for reply in replies for name in reply) == ["worker.1", "worker.2"]

        # Beat queues the heartbeat every second; a worker runs it and it reaches the fleet group.
        message = async_to_sync(asyncio.wait_for)(layer.receive(channel), 30)
        assert message["type"] == "fleet.event"
        # One uvicorn with two worker processes behind one port.
        assert headers["Server"] == "uvicorn"
        assert log.read_text().count("Started server process") == 2
    finally:
        async_to_sync(layer.group_discard)(FLEET_GROUP, channel)
        honcho.send_signal(signal.SIGTERM)
        try:
            honcho.wait(timeout=30)
        except subprocess.TimeoutExpired:
            honcho.kill()
        shutil.rmtree(var_dir, ignore_errors=True)
