"""CPU and Python calls per API v1 request in one process: the ASGI application called as uvicorn
calls it (production settings, PostgreSQL, Redis), without a server, a load client or other
processes in the way. On a shared box this is the steady figure; ``api_load.py`` gives the rates.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379/0 \\
        python benchmarks/api_cpu.py [--requests 100] [--repeats 5] [--jobs 2000] [--database fleetline_apicpu]

For each of submit (``POST /api/v1/jobs/``), list (``GET /api/v1/jobs/?page_size=50``) and detail
(``GET /api/v1/jobs/<id>/``), and the dashboard (``GET /``) and the jobs page (``GET /jobs/``) with
the member's session: the CPU milliseconds per request of this process (all its threads),
the least and the median over ``--repeats`` rounds of ``--requests`` requests; the CPU milliseconds per
request of the PostgreSQL server processes serving this run's database (in the round with the least
of this process's); and the Python and C function calls per request (counted in every thread; the
same on every run). Prints JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import DEMO_USER, database_fresh, postgres_cpu_s  # noqa: E402 - beside this script

Call = tuple[str, str, bytes, bytes]  # method, path, query string, body


async def asgi_request(application: Any, call: Call, headers: list[tuple[bytes, bytes]]) -> int:
    method, path, query, body = call
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": query, "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000), "headers": [*headers, (b"content-length", str(len(body)).encode())],
    }  # fmt: skip
    messages = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop(0)
        await asyncio.Event().wait()  # no disconnect: the response ends the request
        raise AssertionError

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await application(scope, receive, send)
    return int(sent[0]["status"])


class CallCounter:
    """A profile function (``sys.setprofile``) that counts Python and C function calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, _frame: Any, event: str, _arg: Any) -> None:
        if event in ("call", "c_call"):
            self.calls += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2000, help="jobs the member submits first, for the lists")
    parser.add_argument("--database", default="fleetline_apicpu", help="dropped and made again for this run")
    args = parser.parse_args()
    server = (os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/postgres").rsplit("/", 1)[0]
    database_url = f"{server}/{args.database}"
    database_fresh(database_url)
    os.environ.update(
        DJANGO_SETTINGS_MODULE="portal.settings_production",
        DATABASE_URL=database_url,
        REDIS_URL=os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0",
        SECRET_KEY=os.environ.get("SECRET_KEY") or "fleetline-benchmark-only-not-secret-" + "x" * 20,
        ALLOWED_HOSTS="127.0.0.1",
        SECURE_PROXY_SSL_HEADER="HTTP_X_FORWARDED_PROTO,https",
        LOG_LEVEL="WARNING",
        API_THROTTLE_RATE="10000000/min",
        API_SUBMIT_THROTTLE_RATE="10000000/min",
    )
    import django

    django.setup()
    from api_load import seed

    from portal.asgi import application
    from scheduling.models import Job

    seeded = seed()

    cookie = _session_cookie()

    def headers(page: bool) -> list[tuple[bytes, bytes]]:
        common = [(b"host", b"127.0.0.1"), (b"x-forwarded-proto", b"https")]
        if page:
            return [*common, (b"cookie", f"sessionid={cookie}".encode())]
        return [
            *common, (b"content-type", b"application/json"),
            (b"authorization", f"Bearer {seeded['token']}".encode()), (b"idempotency-key", str(uuid.uuid4()).encode()),
        ]  # fmt: skip

    def submit(i: int) -> Call:
        body = {**seeded["body"], "name": f"cpu-{i}", "gpus": 1, "duration_s": 600}
        return "POST", "/api/v1/jobs/", b"", json.dumps(body).encode()

    async def rounds(make: Any, count: int) -> None:
        for i in range(count):
            call = make(i)
            status = await asgi_request(application, call, headers(page=not call[1].startswith("/api/")))
            assert status in (200, 201), status

    asyncio.run(rounds(submit, args.jobs))  # warm up, and jobs for the lists
    newest = Job.objects.order_by("-id").values_list("id", flat=True)[0]
    kinds = {
        "submit": submit,
        "list": lambda _: ("GET", "/api/v1/jobs/", b"page_size=50", b""),
        "detail": lambda _: ("GET", f"/api/v1/jobs/{newest}/", b"", b""),
        "dashboard": lambda _: ("GET", "/", b"", b""),
        "jobs_page": lambda _: ("GET", "/jobs/", b"", b""),
    }
    report: dict[str, Any] = {"requests": args.requests, "repeats": args.repeats}
    for name, make in kinds.items():
        cpu_ms, database_ms = [], []
        for _ in range(args.repeats):
            database_started = postgres_cpu_s(database_url)
            started = time.process_time()
            asyncio.run(rounds(make, args.requests))
            cpu_ms.append((time.process_time() - started) * 1000.0 / args.requests)
            database_ms.append((postgres_cpu_s(database_url) - database_started) * 1000.0 / args.requests)
        counter = CallCounter()
        threading.setprofile(counter)
        sys.setprofile(counter)
        asyncio.run(rounds(make, 20))
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
        report[name] = {
            "cpu_ms_min": round(min(cpu_ms), 2),
            "cpu_ms_median": round(statistics.median(cpu_ms), 2),
            "database_cpu_ms": round(database_ms[cpu_ms.index(min(cpu_ms))], 2),
            "calls_per_request": round(counter.calls / 20),
        }
    report["load_average"] = [round(x, 2) for x in os.getloadavg()]
    from django.db import connections

    connections.close_all()
    database_fresh(database_url)
    print(json.dumps(report, indent=2))


def _session_cookie() -> str:
    """A signed-in session of the demo member, as the login form makes one."""
    from django.contrib.auth.models import User
    from django.test import Client

    client = Client()
    client.force_login(User.objects.get(username=DEMO_USER))
    return str(client.cookies["sessionid"].value)


if __name__ == "__main__":
    main()
