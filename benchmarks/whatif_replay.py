"""A what-if replay end to end as the worker runs it: an uploaded ITP cluster trace, checked by the
importer, replayed under a policy beside the fleet's current one, results and report stored.

Uses the database named by DATABASE_URL (default: a PostgreSQL database
``fleetline_bench_whatif`` on 127.0.0.1, created and wiped by this script). Prints JSON: the
time to check the upload, the replay's wall time, each policy's simulator wall time and headline
metrics, and the stored report's size.

    python benchmarks/whatif_replay.py [--trace ../shared/traces/itp/cluster02.csv] [--fleet 1x4x10x8]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/fleetline_bench_whatif")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
os.environ.setdefault("SECRET_KEY", "fleetline-benchmark-only-not-secret")

from harness import database_fresh  # noqa: E402 - beside this script

HEADLINE = ("jobs", "utilisation", "goodput", "limit_ratio", "jct_mean_s", "jct_p99_s", "wait_mean_s", "sim_wall_s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default=str(ROOT.parent / "shared" / "traces" / "itp" / "cluster02.csv"))
    parser.add_argument("--format", default="itp")
    parser.add_argument("--fleet", default="1x4x10x8")
    parser.add_argument("--preset", default="easy")
    args = parser.parse_args()

    database_fresh(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command

    from simulations.models import Simulation
    from simulations.services import SimulationRequest, simulation_run, simulation_start

    call_command("migrate", verbosity=0)
    admin = User.objects.create_superuser("bench-admin", password="not-used-here")
    data = Path(args.trace).read_bytes()
    started = time.perf_counter()
    simulation = simulation_start(
        user=admin,
        request=SimulationRequest(
            source="trace",
            preset=args.preset,
            trace_name=Path(args.trace).name,
            trace_data=data,
            trace_format=args.format,
            fleet_spec=args.fleet,
        ),
    )
    checked_s = time.perf_counter() - started
    started = time.perf_counter()
    state = simulation_run(simulation_id=simulation.pk)
    run_s = time.perf_counter() - started
    simulation = Simulation.objects.get(pk=simulation.pk)
    results = simulation.results or {}
    report = {
        "trace": Path(args.trace).name,
        "trace_bytes": len(data),
        "jobs": simulation.jobs,
        "fleet": args.fleet,
        "preset": args.preset,
        "state": state,
        "error": simulation.error,
        "upload_check_s": round(checked_s, 2),
        "replay_wall_s": round(run_s, 2),
        "report_html_bytes_stored": len(bytes(simulation.report_html_z or b"")),
        "candidate": {key: results.get("candidate", {}).get(key) for key in HEADLINE},
        "current": {key: results.get("current", {}).get(key) for key in HEADLINE},
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
