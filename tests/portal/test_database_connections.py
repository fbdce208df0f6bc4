"""Database connections: the production profile pools them in each process, so the web server
reuses a handful across requests instead of opening one per request (under ASGI every request
runs in a thread of its own, where a thread's persistent connection would never be reused)."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from api.services import api_token_create
from tests.factories import UserFactory

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
PROBE = (
    "import json, django; django.setup(); from django.conf import settings as s; "
    "d = s.DATABASES['default']; print(json.dumps({k: d.get(k) for k in ('CONN_MAX_AGE', 'CONN_HEALTH_CHECKS')}"
    " | {'pool': d.get('OPTIONS', {}).get('pool')}"
    " | {k: v for k, v in d.get('OPTIONS', {}).items() if k in ('server_side_binding', 'prepare_threshold')}))"
)
SETTINGS_VARIABLES = (
    "DATABASE_URL",
    "DJANGO_SETTINGS_MODULE",
    "DATABASE_POOL_MAX_SIZE",
    "DATABASE_CONN_MAX_AGE",
    "DATABASE_PREPARED_STATEMENTS",
)


def _database_settings(**env: str) -> dict[str, Any]:
    base = {k: v for k, v in os.environ.items() if k not in SETTINGS_VARIABLES}
    with tempfile.TemporaryDirectory(prefix="fl-db-") as var_dir:
        result = subprocess.run(
            [sys.executable, "-c", PROBE],
            cwd=ROOT,
            env={**base, "FLEETLINE_VAR_DIR": var_dir, "SECRET_KEY": secrets.token_urlsafe(50), **env},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_production_profile_pools_postgresql_connections_with_health_checks() -> None:
    found = _database_settings(
        DJANGO_SETTINGS_MODULE="portal.settings_production",
        DATABASE_URL="postgres://fleetline@db.internal:5432/fleetline",
        REDIS_URL="redis://127.0.0.1:6379/0",
    )

    assert found == {
        "CONN_MAX_AGE": 0,  # Django pools or keeps connections, not both
        "CONN_HEALTH_CHECKS": True,
        "pool": {"min_size": 1, "max_size": 8, "timeout": 10.0},
        "server_side_binding": True,
        "prepare_threshold": 5,
    }


def test_postgresql_statements_are_prepared_unless_a_transaction_pooler_asks_otherwise() -> None:
    production = {
        "DJANGO_SETTINGS_MODULE": "portal.settings_production",
        "DATABASE_URL": "postgres://fleetline@db.internal:5432/fleetline",
        "REDIS_URL": "redis://127.0.0.1:6379/0",
    }

    found = _database_settings(**production, DATABASE_PREPARED_STATEMENTS="0")

    assert "server_side_binding" not in found and "prepare_threshold" not in found


def test_the_embedded_default_opens_its_sqlite_file_per_request_as_before() -> None:
    found = _database_settings(DJANGO_SETTINGS_MODULE="portal.settings", DEBUG="1", DATABASE_POOL_MAX_SIZE="8")

    assert found == {"CONN_MAX_AGE": 0, "CONN_HEALTH_CHECKS": True, "pool": None}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str, headers: dict[str, str]) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0


def _sessions_ended() -> int:
    """Sessions on this database that have ended (PostgreSQL counts a session when it closes)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
        return int(cursor.fetchone()[0])


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the pool is PostgreSQL's")
def test_the_production_web_server_reuses_its_database_connections_across_requests(
    subprocess_env: dict[str, str],
) -> None:
    token = api_token_create(user=UserFactory(), name="pool").secret
    port = _free_port()
    var_dir = tempfile.mkdtemp(prefix="fl-pool-")
    env = {
        **subprocess_env,
        "DJANGO_SETTINGS_MODULE": "portal.settings_production",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_PROXY_SSL_HEADER": "HTTP_X_FORWARDED_PROTO,https",
        "FLEETLINE_VAR_DIR": var_dir,
    }
    url = f"http://127.0.0.1:{port}/api/v1/jobs/"
    headers = {"X-Forwarded-Proto": "https", "Authorization": f"Bearer {token}"}
    server = subprocess.Popen(
        [str(VENV_BIN / "uvicorn"), "portal.asgi:application", "--host", "127.0.0.1", "--port", str(port)]
        + ["--lifespan", "off", "--no-access-log", "--proxy-headers"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while _get(url, headers) != 200:
            assert server.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        ended_before = _sessions_ended()

        statuses = [_get(url, headers) for _ in range(30)]
        time.sleep(0.5)  # a session closed by the last request is counted once its backend exits

        assert statuses == [200] * 30
        # Without a pool every request opens a session of its own and closes it: 30 ended.
        assert _sessions_ended() - ended_before <= 2
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=20)
