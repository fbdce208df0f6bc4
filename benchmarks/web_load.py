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
3. websockets: ``--sockets`` sockets on ``/ws/fleet/`` receiving the web processes' heartbeat (1 Hz), with
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
import statistics
import sys
import time
import uuid
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import (  # noqa: E402 - beside this script, found through the path above
    DEMO_PASSWORD,
    DEMO_USER,
    PROXY_HEADERS,
    CpuMeter,
    Layout,
    RequestMaker,
    bounded_main,
    cpu_spent,
    database_fresh,
    goal_check,
    http_phase,
    latency_summary,
    log,
    machine_calibration,
    measured,
    nodes_build,
    percentile,
    production_layout,
    wait_until,
)

LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}
WEB_PHASES = ("api_job_submit", "dashboard", "jobs_page", "api_job_list", "api_job_detail", "websockets")
BURST_JOB_SIZES = (1, 1, 1, 2)  # GPUs: 10,000 of them take 12,500 of a 2,048-node fleet's 16,384
# Submissions wait on database round trips: a few threads, each on its own connection, overlap them.
SUBMIT_THREADS = 8


def demo_seed_with_token() -> dict[str, Any]:
    """The demo fleet and logins, and an API v1 token for the demo member, made as the tokens page does."""
    from django.contrib.auth.models import User
    from django.core.management import call_command

    from api.services import api_token_create
    from portal.demo import demo_seed
    from tenants.models import Membership

    call_command("migrate", interactive=False, verbosity=0)
    demo_seed()
    member = User.objects.get(username=DEMO_USER)
    return {
        "token": api_token_create(user=member, name="web_load").secret,
        "team": Membership.objects.filter(user=member).select_related("team").get().team.slug,
        "priority_class": "training",
        "accelerator": "H100",
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
        return {**PROXY_HEADERS, "Authorization": f"Bearer {self.token}"}


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


# Heartbeats queued while a thousand sockets open may take this long to drain before measuring.
SETTLE_MAX_S = 30.0


@dataclass
class _Heartbeats:
    """What the sockets of `websocket_phase` share: the heartbeats' lags (overall and by second of
    the measurement), the gaps between a socket's heartbeats, heartbeats per socket, why sockets
    failed, the sockets opened and the latest lag seen."""

    sockets: int
    lags: list[float] = field(default_factory=list)
    lags_by_second: dict[int, list[float]] = field(default_factory=dict)
    gaps: list[float] = field(default_factory=list)
    received: list[int] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)
    measuring: asyncio.Event = field(default_factory=asyncio.Event)
    opened: list[Any] = field(default_factory=list)
    latest_lag: float = float("inf")
    measuring_since: float = 0.0

    def __post_init__(self) -> None:
        self.received = [0] * self.sockets

    def failed(self, why: str) -> None:
        self.failures[why] = self.failures.get(why, 0) + 1

    def heard(self, index: int, sent_at: str, last: float | None) -> float | None:
        """A heartbeat sent at `sent_at` came to socket `index`, whose heartbeat before came at
        `last`: when this one came, while measuring (else `last`)."""
        now = time.time()
        lag = now - datetime.fromisoformat(sent_at).timestamp()
        self.latest_lag = lag
        if not self.measuring.is_set():
            return last
        self.lags.append(lag)
        self.lags_by_second.setdefault(int(now - self.measuring_since), []).append(lag)
        if last is not None:
            self.gaps.append(now - last)
        self.received[index] += 1
        return now

    def summary(self, duration_s: float) -> dict[str, Any]:
        expected = int(duration_s)  # heartbeats at 1 Hz
        ordered_gaps = sorted(self.gaps)
        opened = len(self.opened)
        return {
            "heartbeats_received": len(self.lags),
            "heartbeats_expected": expected * opened,
            "sockets_missing_beats": sum(1 for count in self.received[:opened] if count < expected - 1),
            "lag": latency_summary(self.lags),
            # A lag that grows second by second is a backlog: heartbeats arrive slower than 1 Hz.
            "lag_p50_ms_by_second": [
                round(statistics.median(values) * 1000.0) for _, values in sorted(self.lags_by_second.items())
            ],
            "gap_p99_s": round(percentile(ordered_gaps, 0.99) or 0.0, 2),
            "gap_max_s": round(ordered_gaps[-1], 2) if ordered_gaps else None,
        }


async def _one_socket(
    session: Any, url: str, headers: dict[str, str], opening: asyncio.Semaphore, beats: _Heartbeats, index: int
) -> None:
    import aiohttp

    try:
        async with opening:
            ws = await session.ws_connect(url, headers=headers, heartbeat=None, timeout=aiohttp.ClientWSTimeout(30))
    except Exception as error:  # noqa: BLE001
        beats.failed(type(error).__name__)
        return
    beats.opened.append(ws)
    last: float | None = None
    try:
        # Until cancelled at the end of the phase: a receive with a timeout made a task and a timer
        # per socket twice a second, which with thousands of sockets cost the load client more
        # than the heartbeats themselves, and its lag was counted as the server's.
        while True:
            message = await ws.receive()
            if message.type != aiohttp.WSMsgType.TEXT:
                if message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
                    beats.failed("closed by server")
                    return
                continue
            payload = json.loads(message.data)
            if payload.get("kind") == "heartbeat":
                last = beats.heard(index, payload["sent_at"], last)
    finally:
        await ws.close()


async def websocket_phase(
    session: Any, client: Client, *, sockets: int, duration_s: float, cpu: CpuMeter | None = None
) -> dict[str, Any]:
    """Open ``sockets`` websockets (at most 50 opening at once); let the heartbeats queued while
    they opened drain (until one arrives within 2 s of being sent, for at most ``SETTLE_MAX_S``);
    then for ``duration_s`` record each heartbeat's lag (arrival minus its ``sent_at``) and the
    gaps between a socket's heartbeats."""
    url = client.base_url.replace("http://", "ws://") + "/ws/fleet/"
    headers = {**client.page_headers(), "Origin": f"https://{client.host}"}
    opening = asyncio.Semaphore(50)
    beats = _Heartbeats(sockets)
    start_cpu = cpu() if cpu else {}
    started = time.perf_counter()
    tasks = [asyncio.create_task(_one_socket(session, url, headers, opening, beats, i)) for i in range(sockets)]
    deadline = time.perf_counter() + 120
    while len(beats.opened) + sum(beats.failures.values()) < sockets and time.perf_counter() < deadline:
        await asyncio.sleep(0.1)
    open_s = time.perf_counter() - started
    open_cpu = cpu() if cpu else {}
    settled = time.perf_counter()
    beats.latest_lag = float("inf")
    while beats.latest_lag > 2.0 and time.perf_counter() - settled < SETTLE_MAX_S:
        await asyncio.sleep(0.2)
    settle_s = time.perf_counter() - settled
    feed_cpu = cpu() if cpu else {}
    beats.measuring_since = time.time()
    beats.measuring.set()
    await asyncio.sleep(duration_s)
    beats.measuring.clear()
    fed_cpu = cpu() if cpu else {}
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    feed_cpu_s = cpu_spent(before=feed_cpu, after=fed_cpu)
    return {
        "sockets": sockets,
        "opened": len(beats.opened),
        "open_failures": beats.failures,
        "open_all_s": round(open_s, 2),
        "open_cpu_s": cpu_spent(before=start_cpu, after=open_cpu),
        "settle_s": round(settle_s, 1),
        "feed_cpu_s": feed_cpu_s,
        # The web processes' CPU per heartbeat delivered to one socket while fed.
        "web_cpu_ms_per_delivery": round(feed_cpu_s.get("web", 0.0) * 1000.0 / len(beats.lags), 3)
        if beats.lags
        else None,
        **beats.summary(duration_s),
    }


def run_client(load: Coroutine[Any, Any, dict[str, Any]]) -> dict[str, Any]:
    """Run the load client on uvloop, as the web processes run (uvicorn's `--loop auto`): on the
    default loop the client reading 5,000 sockets took more CPU than the server feeding them, on the
    same two cores, and its own delay was counted as the server's lag."""
    import uvloop

    return uvloop.run(load)


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
            return "POST", f"{base}/api/v1/jobs/", {"json": body, "headers": headers}, 201

        def get(path: str, headers: dict[str, str]) -> RequestMaker:
            return lambda _: ("GET", f"{base}{path}", {"headers": headers}, 200)

        if "api_job_submit" in args.phases:
            log(f"api_job_submit: {clients} clients for {duration_s:.0f} s")
            results["api_job_submit"] = await measured(
                cpu, http_phase(session, make=submit, clients=clients, duration_s=duration_s)
            )
        async with session.get(f"{base}/api/v1/jobs/", headers=client.api_headers()) as response:
            listed = (await response.json())["results"]
        phases: list[tuple[str, RequestMaker]] = [
            ("dashboard", get("/", client.page_headers())),
            ("jobs_page", get("/jobs/", client.page_headers())),
            ("api_job_list", get("/api/v1/jobs/", client.api_headers())),
        ]
        if listed:
            phases.append(("api_job_detail", get(f"/api/v1/jobs/{listed[0]['id']}/", client.api_headers())))
        for name, make in phases:
            if name not in args.phases:
                continue
            log(f"{name}: {clients} clients for {duration_s:.0f} s")
            results[name] = await measured(cpu, http_phase(session, make=make, clients=clients, duration_s=duration_s))
        if args.sockets and "websockets" in args.phases:
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

    from scheduling.models import AcceleratorType
    from tenants.models import Department, FleetPolicy, PriorityClass, Quota, Team

    call_command("migrate", interactive=False, verbosity=0)
    h100 = AcceleratorType.objects.create(name="H100")
    nodes_build(nodes=nodes, accelerator=h100)
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
    parser.add_argument("--priority-class", help="priority class name for submissions (with --base-url)")
    parser.add_argument("--accelerator", help="accelerator type name for submissions (with --base-url)")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    parser.add_argument(
        "--phases",
        default=",".join(WEB_PHASES),
        type=lambda text: [name for name in text.split(",") if name],
        help=f"the web phases to run, comma-separated, in their order (default all: {','.join(WEB_PHASES)})",
    )
    args = parser.parse_args()
    unknown = set(args.phases) - set(WEB_PHASES)
    if unknown:
        parser.error(f"--phases: unknown {', '.join(sorted(unknown))}; known: {', '.join(WEB_PHASES)}")
    return args


def run(args: argparse.Namespace) -> dict[str, Any]:
    report: dict[str, Any] = {
        "settings": {
            k: getattr(args, k)
            for k in (
                *("duration_s", "clients", "sockets", "burst_jobs", "burst_nodes", "web_workers", "workers"),
                "phases",
            )
        },
        "cpus": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "machine": machine_calibration(),
    }
    if args.base_url:
        client = Client(loopback_only(args.base_url), token=args.token or "")
        client.api = {
            "team": args.team,
            "priority_class": args.priority_class,
            "accelerator": args.accelerator,
        }
        report["layout"] = f"running at {client.base_url}"
        report["web"] = run_client(web_load(client, args, username=args.username, password=args.password))
        report["placement_burst"] = "skipped: it rebuilds its database, so it runs only on a layout this script starts"
        report["goals"] = goals_of(report)
        return report

    with production_layout(args, demo_seed_with_token, report) as (layout, api):
        client = Client(layout.base_url, token=api.pop("token"), api=api)
        report["web"] = run_client(
            web_load(client, args, username=args.username, password=args.password, cpu=layout.cpu_s)
        )
        if args.burst_jobs:
            report["placement_burst"] = placement_burst(
                layout, jobs=args.burst_jobs, nodes=args.burst_nodes, timeout_s=args.burst_timeout_s
            )
    report["goals"] = goals_of(report)
    return report


def goals_of(report: dict[str, Any]) -> dict[str, Any]:
    """Each figure of the run beside issue 46's goal for it, and whether it holds."""
    web = report.get("web", {})
    goals: dict[str, Any] = {}
    for phase, rate, p99_ms in (("dashboard", 100, 300), ("jobs_page", 100, 300), ("api_job_list", 150, 200)):
        if phase in web:
            goals[f"{phase}_req_per_s"] = goal_check(web[phase]["req_per_s"], at_least=rate)
            goals[f"{phase}_p99_ms"] = goal_check(web[phase]["p99_ms"], at_most=p99_ms)
    sockets = web.get("websockets")
    if sockets:
        goals["websockets_lag_p99_ms"] = goal_check(sockets["lag"]["p99_ms"], at_most=1000)
        goals["websockets_gap_max_s"] = goal_check(sockets["gap_max_s"], at_most=1.5)
        # Every socket fed at 1 Hz, or the lag and gaps speak for the sockets that were.
        goals["websockets_missing_beats"] = goal_check(sockets["sockets_missing_beats"], at_most=0)
        goals["websockets_sockets"] = goal_check(sockets["opened"], at_least=5000)
    burst = report.get("placement_burst")
    if isinstance(burst, dict):
        goals["placement_burst_placed_per_s"] = goal_check(burst["placed_per_s"], at_least=5000)
    return goals


def main() -> None:
    bounded_main(parse_args(), run)


if __name__ == "__main__":
    main()
