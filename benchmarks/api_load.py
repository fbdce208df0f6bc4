"""A bounded loopback load of API v1 on the production layout: job submission by names, job
listing (one cursor page) and job detail through ``/api/v1/``, with bearer tokens and per-user
throttling on (budgets set high enough not to refuse). Prints JSON.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres python benchmarks/api_load.py \
        [--duration-s 15] [--clients 16] [--web-workers 2] [--database fleetline_apiload] [--out FILE]

The layout, its fresh database, its own Redis and the CPU accounting are ``harness.py``'s (as for ``web_load.py``): one
uvicorn with ``--web-workers`` processes, ``--workers`` Celery workers and beat (the scheduling
cycle runs throughout, as in production), ``portal.settings_production``, the demo fleet and
logins. Phases, each ``--duration-s`` long, ``--clients`` concurrent clients back to back:

1. ``POST /api/v1/jobs/``: one 1-GPU job per request by team, priority class and accelerator
   name, each with its own Idempotency-Key;
2. ``GET /api/v1/jobs/?page_size=50``: the newest 50 jobs with their pending reasons;
3. ``GET /api/v1/jobs/<id>/``: one job with its pending reason and placement.

Each phase reports requests per second, p50/p95/p99 latency, errors by status, and the CPU seconds
of each part of the layout (web, worker, beat, redis, the load client, the whole machine). The run
stops after ``--max-s``; requests go to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import (  # noqa: E402 - beside this script, found through the path above
    DEMO_USER,
    PROXY_HEADERS,
    Layout,
    RequestMaker,
    bounded_main,
    http_phase,
    log,
    measured,
    production_layout,
)

# Budgets far above what the layout can serve: the throttle is counted (a Redis round trip per
# request, as in production) but never refuses.
UNLIMITED_RATE = "10000000/min"


def seed() -> dict[str, Any]:
    """The demo fleet and logins, and a v1 token for the demo member, made as the tokens page does."""
    from django.contrib.auth.models import User
    from django.core.management import call_command

    from api.services import api_token_create
    from portal.demo import demo_seed
    from tenants.models import Membership

    call_command("migrate", interactive=False, verbosity=0)
    demo_seed()
    member = User.objects.get(username=DEMO_USER)
    team = Membership.objects.filter(user=member).select_related("team").get().team.slug
    return {
        "token": api_token_create(user=member, name="api_load").secret,
        "body": {"team": team, "priority_class": "training", "accelerator": "H100"},
    }


async def api_load(base: str, seeded: dict[str, Any], args: argparse.Namespace, layout: Layout) -> dict[str, Any]:
    import aiohttp

    headers = {**PROXY_HEADERS, "Authorization": f"Bearer {seeded['token']}"}
    results: dict[str, Any] = {}
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    async with aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar()) as session:

        def submit(i: int) -> tuple[str, str, dict[str, Any], int]:
            body = {**seeded["body"], "name": f"load-{i}", "gpus": 1, "duration_s": 600}
            return (
                "POST",
                f"{base}/api/v1/jobs/",
                {"json": body, "headers": {**headers, "Idempotency-Key": str(uuid.uuid4())}},
                201,
            )

        def get(path: str) -> RequestMaker:
            return lambda _: ("GET", f"{base}{path}", {"headers": headers}, 200)

        log(f"v1 submit: {args.clients} clients for {args.duration_s:.0f} s")
        results["v1_job_submit"] = await measured(
            layout.cpu_s, http_phase(session, make=submit, clients=args.clients, duration_s=args.duration_s)
        )
        async with session.get(f"{base}/api/v1/jobs/?page_size=1", headers=headers) as response:
            newest = (await response.json())["results"][0]["id"]
        for name, make in (
            ("v1_job_list", get("/api/v1/jobs/?page_size=50")),
            ("v1_job_detail", get(f"/api/v1/jobs/{newest}/")),
        ):
            log(f"{name}: {args.clients} clients for {args.duration_s:.0f} s")
            results[name] = await measured(
                layout.cpu_s, http_phase(session, make=make, clients=args.clients, duration_s=args.duration_s)
            )
    return results


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration-s", type=float, default=15.0, help="length of each phase")
    parser.add_argument("--clients", type=int, default=16, help="concurrent HTTP clients")
    parser.add_argument("--web-workers", type=int, default=2, help="uvicorn worker processes (WEB_CONCURRENCY)")
    parser.add_argument("--workers", type=int, default=1, help="Celery workers (the cycle runs throughout)")
    parser.add_argument("--max-s", type=float, default=600.0, help="the whole run stops after this")
    parser.add_argument("--database", default="fleetline_apiload", help="dropped and made again for this run")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    return parser.parse_args()


def run(args: argparse.Namespace) -> dict[str, Any]:
    os.environ["API_THROTTLE_RATE"] = os.environ["API_SUBMIT_THROTTLE_RATE"] = UNLIMITED_RATE
    report: dict[str, Any] = {
        "settings": {k: getattr(args, k) for k in ("duration_s", "clients", "web_workers", "workers")},
        "cpus": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }
    with production_layout(args, seed, report) as (layout, seeded):
        report["api_v1"] = asyncio.run(api_load(layout.base_url, seeded, args, layout))
    return report


def main() -> None:
    bounded_main(parse_args(), run)


if __name__ == "__main__":
    main()
