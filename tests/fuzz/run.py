"""`make fuzz`: schemathesis over the whole ``/api/v1/`` schema against a real server process.

    python tests/fuzz/run.py [--max-time-s 70] [--seed 20250101] [--roles lead,admin]

It starts the production web process (the Procfile's uvicorn, ``portal.settings_production``) on
a fresh database (PostgreSQL, database ``--database`` on DATABASE_URL's server, when DATABASE_URL
is a PostgreSQL URL; otherwise a SQLite file of its own) and a Redis server of its own on a free
port, seeds the demo fleet, teams and logins, makes an API token for each role, and runs
``schemathesis run`` once per role with every phase (examples, coverage, fuzzing, stateful) and
the checks that no answer is a server error and that every answer's status code and body are what
the schema says. Fields that name a team, an accelerator, a priority class or a user take the
database's names most of the time, so that requests get past validation; the stateful phase
chains calls along the schema's links (a create, then a read or an action on what it made).

The run is seeded and schemathesis's generation deterministic; each role's run is bounded by
``--max-time-s``. It fails when schemathesis finds anything, or when the stateful phase followed
no link. Requests go only to the loopback interface.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from harness import (  # noqa: E402 - the benchmarks' production layout, found through the path above
    PROXY_HEADERS,
    Layout,
    Process,
    database_fresh,
    django_setup,
    http_status,
    log,
    procfile_command,
    wait_until,
)

PHASES = "examples,coverage,fuzzing,stateful"
# A server error, an answer outside the schema (body, or a status code the operation does not
# document), and a content type other than the documented one.
CHECKS = "not_a_server_error,response_schema_conformance,status_code_conformance,content_type_conformance"
ROLES = ("lead", "admin")


# Bound to the names the database holds, drawn this often instead of made-up text: requests that
# name a real team, accelerator or priority class get past validation into the services (and a
# create's id into the stateful phase's chains); the rest still fuzz those fields.
KNOWN_NAME_PROBABILITY = 0.75
# Body fields and path parameters that name something, and the vocabulary each takes.
BINDINGS = {
    "body.team": "teams",
    "path.slug": "teams",
    "body.accelerator": "accelerators",
    "path.accelerator": "accelerators",
    "body.priority_class": "priority_classes",
    "body.username": "usernames",
    "path.username": "usernames",
    "body.gpus": "gpus",
    "body.duration_s": "durations",
    "body.kind": "job_kinds",
}


def seed_with_tokens(roles: tuple[str, ...]) -> tuple[dict[str, str], dict[str, dict[str, list[Any]]]]:
    """The demo fleet, teams and logins on the fresh database; an API token per role, and the
    names each role's requests may use (a lead's teams are the ones they lead)."""
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connections

    from api.services import api_token_create
    from portal.demo import demo_seed
    from scheduling.models import AcceleratorType
    from tenants.models import Membership, PriorityClass, Team

    call_command("migrate", interactive=False, verbosity=0)
    demo_seed()
    tokens: dict[str, str] = {}
    vocabularies: dict[str, dict[str, list[Any]]] = {}
    shared = {
        "accelerators": sorted(AcceleratorType.objects.values_list("name", flat=True)),
        # A job's class must be of its kind: training, the default kind, bound below.
        "priority_classes": sorted(PriorityClass.objects.filter(kind="training").values_list("name", flat=True)),
        "job_kinds": ["training"],
        "durations": [600, 3600],
        "usernames": sorted(User.objects.values_list("username", flat=True)),
        "gpus": [1, 2, 8, 16],
    }
    for role in roles:
        user = User.objects.get(username=role)
        tokens[role] = api_token_create(user=user, name="fuzz").secret
        led = Membership.objects.filter(user=user, role=Membership.Role.LEAD).values_list("team__slug", flat=True)
        teams = sorted(led) or sorted(Team.objects.values_list("slug", flat=True))
        vocabularies[role] = {"teams": teams, **shared}
    connections.close_all()  # the server is the database's only client from here on
    return tokens, vocabularies


def schemathesis_config(vocabulary: dict[str, list[Any]]) -> str:
    """A schemathesis.toml binding the fields that name things to ``vocabulary``."""
    lines = []
    for name, values in vocabulary.items():
        lines += [f"[dictionaries.{name}]", f"values = {json.dumps(values)}", ""]
    lines.append("[parameters]")
    for key, name in BINDINGS.items():
        lines.append(f'"{key}" = {{ dictionary = "{name}", probability = {KNOWN_NAME_PROBABILITY} }}')
    # The stateful phase follows the schema's own links (create, then read and act on what it
    # made: api.schema.add_links), not the dozens schemathesis would guess besides.
    # Its chains start from a create that succeeds: valid input there (the other phases send
    # the invalid kind).
    lines += ["", "[phases.stateful.inference]", "algorithms = []", "", "[phases.stateful.generation]"]
    lines.append('mode = "positive"')
    return "\n".join(lines) + "\n"


def database_url_for(args: argparse.Namespace, layout_dir: Path) -> str:
    configured = os.environ.get("DATABASE_URL", "")
    if configured.startswith(("postgres://", "postgresql://")):
        return configured.rsplit("/", 1)[0] + f"/{args.database}"
    return f"sqlite:///{layout_dir / 'fuzz.sqlite3'}"


def web_start(layout: Layout) -> None:
    """The Procfile's web process alone (one uvicorn worker: the fuzzer sends one request at a
    time), with request budgets far above what the run sends."""
    env = {
        **layout.env(),
        "WEB_CONCURRENCY": "1",
        "API_THROTTLE_RATE": "1000000/min",
        "API_SUBMIT_THROTTLE_RATE": "1000000/min",
        "HONCHO_PROCESS_NAME": "web",
    }
    web = Process("web", procfile_command("web"), env, layout.var_dir / "web.log")
    web.start()
    layout.processes.append(web)
    wait_until(lambda: http_status(f"{layout.base_url}/login/") == 200, timeout_s=90, what="the web server")


def schemathesis_run(
    *,
    base_url: str,
    token: str,
    role: str,
    vocabulary: dict[str, list[Any]],
    args: argparse.Namespace,
    report_dir: Path,
) -> tuple[int, dict[str, Any]]:
    """One role's run; its exit code and what its report says about the stateful phase."""
    config = report_dir / f"{role}.schemathesis.toml"
    config.write_text(schemathesis_config(vocabulary))
    command = [
        str(Path(sys.executable).parent / "schemathesis"),
        "--config-file",
        str(config),
        "run",
        f"{base_url}/api/v1/schema/?format=json",
        "--phases",
        PHASES,
        "--checks",
        CHECKS,
        "--header",
        f"Authorization: Bearer {token}",
        *(arg for name, value in PROXY_HEADERS.items() for arg in ("--header", f"{name}: {value}")),
        "--seed",
        str(args.seed),
        "--generation-deterministic",
        "--max-examples",
        str(args.max_examples),
        "--max-time",
        str(args.max_time_s),
        "--workers",
        "1",
        "--request-timeout",
        "30",
        "--report",
        "junit",
        "--report-junit-path",
        str(report_dir / f"{role}.xml"),
        "--no-color",
    ]
    log(f"schemathesis as {role}: {PHASES}, seed {args.seed}, at most {args.max_time_s} s")
    started = time.monotonic()
    lines: list[str] = []
    with subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True) as process:
        assert process.stdout is not None
        for line in process.stdout:
            sys.stdout.write(line)
            lines.append(line)
    summary = {**run_summary("".join(lines)), "wall_s": round(time.monotonic() - started, 1)}
    return process.returncode, summary


def run_summary(output: str) -> dict[str, int]:
    """From schemathesis's report: the test cases it made and those that failed, the stateful
    phase's scenarios (chains of calls) and the links between operations they followed."""
    generated = re.search(r"^\s*(\d+) generated", output, re.MULTILINE)
    failing = re.search(r"^\s*\d+ generated, (\d+) found", output, re.MULTILINE)
    scenarios = re.search(r"Stateful \(in [^)]*\)\s+Scenarios:\s+(\d+)", output)
    links = re.search(r"API Links:\s+(\d+) covered / (\d+) selected", output)
    return {
        "cases": int(generated.group(1)) if generated else 0,
        "failing_cases": int(failing.group(1)) if failing else 0,
        "stateful_scenarios": int(scenarios.group(1)) if scenarios else 0,
        "links_covered": int(links.group(1)) if links else 0,
        "links": int(links.group(2)) if links else 0,
    }


def wait_for_a_stop() -> None:
    """Until Ctrl-C or SIGTERM (SIGINT is ignored in a job a script puts in the background)."""
    stopped = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopped
        stopped = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    while not stopped:
        time.sleep(0.2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--roles", default=",".join(ROLES), help="demo logins to fuzz as, one run each")
    parser.add_argument("--seed", type=int, default=20250101)
    parser.add_argument("--max-examples", type=int, default=12, help="per operation, in the fuzzing phase")
    parser.add_argument("--max-time-s", type=int, default=70, help="bound of each role's run")
    parser.add_argument("--database", default="fleetline_fuzz", help="on DATABASE_URL's PostgreSQL server")
    parser.add_argument("--report-dir", default=str(ROOT / "var" / "fuzz"))
    parser.add_argument(
        "--serve", action="store_true", help="start the server, print its URL and the tokens, and wait (to replay)"
    )
    args = parser.parse_args()
    roles = tuple(role for role in args.roles.split(",") if role)
    report_dir = Path(args.report_dir)
    report_dir.mkdir(parents=True, exist_ok=True)

    started = time.monotonic()
    layout = Layout(database_url="", web_workers=1, workers=0)
    layout.database_url = database_url_for(args, layout.var_dir)
    results: dict[str, Any] = {"database": layout.database_url.split(":", 1)[0], "roles": {}}
    failed = False
    try:
        layout.redis_start()
        database_fresh(layout.database_url)
        django_setup(database_url=layout.database_url, redis_url=layout.redis_url)
        log("seeding the database")
        tokens, vocabularies = seed_with_tokens(roles)
        log("starting the web server")
        web_start(layout)
        if args.serve:
            print(json.dumps({"url": layout.base_url, "tokens": tokens}), flush=True)
            wait_for_a_stop()
            return 0
        for role in roles:
            code, summary = schemathesis_run(
                base_url=layout.base_url,
                token=tokens[role],
                role=role,
                vocabulary=vocabularies[role],
                args=args,
                report_dir=report_dir,
            )
            results["roles"][role] = {"exit_code": code, **summary}
            if code != 0:
                failed = True
            if not summary["stateful_scenarios"] or not summary["links_covered"]:
                log(f"as {role}: the stateful phase chained no calls")
                failed = True
    finally:
        web_log = layout.var_dir / "web.log"
        if web_log.exists():
            shutil.copy(web_log, report_dir / "web.log")
        layout.close()
        database_fresh(layout.database_url)  # leave it empty
    results["wall_s"] = round(time.monotonic() - started, 1)
    results["passed"] = not failed
    print(json.dumps(results, indent=2))
    cases = sum(role["cases"] for role in results["roles"].values())
    failing = sum(role["failing_cases"] for role in results["roles"].values())
    print(f"fuzz: {cases - failing} passed, {failing} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
