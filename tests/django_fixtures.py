"""Fixtures for every test that runs against Django: real child processes (Celery worker, ASGI
server) pointed at the test database and the same Redis the tests use. Without REDIS_URL the
session runs the embedded Redis itself, from start to end.

The root conftest loads this plugin only when pytest-django is active, so the engine and
simulator tests also run without Django (``pytest -p no:django tests/engine tests/sim``)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import OperationalError, connection
from pytest_django import DjangoDbBlocker

from portal import embedded_redis
from tests.oidc_provider.fixtures import oidc_provider  # noqa: F401  # one OpenID Connect provider per session

ROOT = Path(__file__).resolve().parent.parent


_embedded_redis_key = pytest.StashKey[subprocess.Popen[bytes] | None]()


def pytest_configure(config: pytest.Config) -> None:
    """Start the embedded Redis for this session when no REDIS_URL is given (settings only name
    its socket). One that already answers there (another session's) is used as it is."""
    _flush_retried_after_a_deadlock()
    started = None
    if settings.EMBEDDED_REDIS and not embedded_redis.answers(settings.EMBEDDED_REDIS_SOCKET):
        started = embedded_redis.start(settings.EMBEDDED_REDIS_SOCKET)
    config.stash[_embedded_redis_key] = started


# PostgreSQL's code for a transaction it ended to break a deadlock.
_DEADLOCK = "40P01"


def _flush_retried_after_a_deadlock() -> None:
    """A transactional test's flush (a TRUNCATE of every table, table by table) can deadlock with
    the last request of a browser test's server, still reading several tables as the test ends.
    PostgreSQL then ends one of the two; when it ends the flush, the flush is run again."""
    from django.db.backends.postgresql.operations import DatabaseOperations

    flush = DatabaseOperations.execute_sql_flush

    def retried(self: DatabaseOperations, sql_list: list[str]) -> None:
        for attempt in range(3):
            try:
                flush(self, sql_list)
                return
            except OperationalError as error:
                if getattr(error.__cause__, "sqlstate", None) != _DEADLOCK or attempt == 2:
                    raise
                time.sleep(0.2)

    DatabaseOperations.execute_sql_flush = retried  # type: ignore[method-assign]


def pytest_unconfigure(config: pytest.Config) -> None:
    started = config.stash.get(_embedded_redis_key, None)
    if started is not None:
        embedded_redis.stop(started, settings.EMBEDDED_REDIS_SOCKET)


def _database_url() -> str:
    """A URL for the database the test session is using right now (the test database)."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    user = quote(db.get("USER") or "")
    password = quote(db.get("PASSWORD") or "")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgres://{auth}{db.get('HOST') or ''}{port}/{db['NAME']}"


@pytest.fixture(scope="session")
def children_disconnected(django_db_setup: None, django_db_blocker: DjangoDbBlocker) -> Iterator[None]:
    """At the end of the session, before the test database is dropped, end the other PostgreSQL
    sessions on it: a stopped child's server process can outlive it by a moment, and connections
    opened by worker threads of this process (channels' database_sync_to_async) stay open idle.
    PostgreSQL refuses to drop a database that has sessions."""
    yield
    if connection.vendor != "postgresql":
        return
    others = "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(f"SELECT pg_terminate_backend(pid) {others}")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            cursor.execute(f"SELECT count(*) {others}")
            if cursor.fetchone()[0] == 0:
                return
            time.sleep(0.05)


@pytest.fixture(scope="session")
def test_database_url(django_db_setup: None, children_disconnected: None) -> str:
    """The test database's URL, for child processes that outlive one test (a module's fixture)."""
    return _database_url()


@pytest.fixture
def subprocess_env(transactional_db: None, children_disconnected: None) -> dict[str, str]:
    """Environment for child processes: the test database and the tests' Redis."""
    return {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "PYTHONUNBUFFERED": "1",
    }


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


@pytest.fixture
def celery_worker_process(subprocess_env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """A real Celery worker process consuming every queue from the tests' Redis."""
    from portal.celery import app

    app.control.purge()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "portal",
            "worker",
            "--pool=solo",
            "--loglevel=WARNING",
            "-Q",
            settings.CELERY_WORKER_QUEUES,
            "-n",
            f"test-{os.getpid()}@%h",
            "--without-gossip",
            "--without-mingle",
        ],
        cwd=ROOT,
        env=subprocess_env,
    )
    deadline = time.monotonic() + 30
    while not app.control.ping(timeout=0.5):
        if process.poll() is not None or time.monotonic() > deadline:
            _stop(process)
            pytest.fail("the Celery worker did not come up")
    yield process
    _stop(process)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class AsgiServers:
    """Daphne serving the whole ASGI application (HTTP and websockets), kept running from one test
    to the next while the environment asked for stays the same: a server's start and stop cost a
    few seconds each on a busy two-core machine, and it keeps nothing of its own between requests
    (sessions, the tables and the channel layer are the test's, flushed or emptied between tests)
    but the fleet epoch, which a process keeps for `fleet_calendar.CACHE_TTL_S`: a test that reads
    an exact fleet time waits that out (`test_incidents_live.py`).
    A test asking for another environment gets a fresh server, the previous one stopped."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._env: dict[str, str] = {}
        self._url = ""

    def serving(self, env: dict[str, str]) -> str:
        """The base URL of a running server started with ``env`` (but for the name of the test
        that pytest keeps in PYTEST_CURRENT_TEST, which the server never reads)."""
        env = {name: value for name, value in env.items() if name != "PYTEST_CURRENT_TEST"}
        if self._process is not None and (self._env != env or self._process.poll() is not None):
            self.stop()
        if self._process is None:
            self._url = self._start(env)
            self._env = dict(env)
        return self._url

    def _start(self, env: dict[str, str]) -> str:
        port = _free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "portal.asgi:application"],
            cwd=ROOT,
            env=env,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    _stop(process)
                    pytest.fail("the ASGI server did not come up")
                time.sleep(0.1)
        self._process = process
        return f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        if self._process is not None:
            _stop(self._process)
            self._process = None


@pytest.fixture(scope="session")
def asgi_servers(children_disconnected: None) -> Iterator[AsgiServers]:
    """The session's Daphne, stopped at its end (before the test database's sessions are ended)."""
    servers = AsgiServers()
    yield servers
    servers.stop()


@pytest.fixture
def asgi_server(subprocess_env: dict[str, str], asgi_servers: AsgiServers) -> str:
    """Daphne serving the whole ASGI application on the test database; yields its base URL."""
    return asgi_servers.serving(subprocess_env)


@pytest.fixture(autouse=True)
def kept_fleet_dropped() -> Iterator[None]:
    """Each test starts its own fleet: the state a leader keeps between ticks
    (``scheduling.cycle.kept``) never carries over from another test's database."""
    from scheduling.cycle.kept import kept_fleet_forget

    kept_fleet_forget()
    yield
    kept_fleet_forget()


@pytest.fixture(autouse=True)
def fleet_epoch_dropped() -> Iterator[None]:
    """Nor the fleet epoch a web process keeps for a few seconds (``scheduling.fleet_calendar``)."""
    from scheduling.fleet_calendar import fleet_epoch_forget

    fleet_epoch_forget()
    yield
    fleet_epoch_forget()
