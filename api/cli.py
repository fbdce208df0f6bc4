"""``fleetline``: the command line for Fleetline's API v1, in the manner of ``squeue`` / ``sbatch``.

    fleetline submit --team language-models --name sweep --gpus 8 --duration 2h
    fleetline queue                 # pending jobs, why they wait and when they should start
    fleetline jobs --state running  # jobs you may see
    fleetline show 42               # one job and its history
    fleetline cancel 42
    fleetline quota [TEAM]
    fleetline request-quota --team language-models --accelerator H100 --guaranteed 64 --justification "..."
    fleetline quota-set language-models H100 --guaranteed 64 --borrow-limit 32 --reason "..."   # fleet admins
    fleetline usage --start 2026-01-01 --end 2026-01-31   # finance, admins; leads see their own teams

The server and token come from ``--url`` / ``--token``, else ``FLEETLINE_URL`` / ``FLEETLINE_TOKEN``,
else the config file (``FLEETLINE_CONFIG``, default ``~/.config/fleetline/config.toml``) with
``url = "..."`` and ``token = "..."``. Tables by default, ``--json`` for scripts.

Exit codes: 0 done; 1 unexpected answer (a server error); 2 wrong usage or missing settings;
3 server unreachable or not a Fleetline API; 4 token missing, wrong or revoked; 5 refused (not
permitted); 6 not found; 7 invalid request (the error says which field); 8 busy (throttled or
briefly unavailable: retry later).

Standard library only: it runs anywhere Python does, without Django.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tomllib
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TextIO

EXIT_OK = 0
EXIT_SERVER = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_AUTH = 4
EXIT_REFUSED = 5
EXIT_NOT_FOUND = 6
EXIT_INVALID = 7
EXIT_BUSY = 8

TIMEOUT_S = 30.0
DEFAULT_CONFIG = Path("~/.config/fleetline/config.toml")
EXIT_FOR_STATUS = {400: EXIT_INVALID, 401: EXIT_AUTH, 403: EXIT_REFUSED, 404: EXIT_NOT_FOUND, 409: EXIT_INVALID}


class CliError(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


# Settings and transport ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Settings:
    url: str
    token: str


def settings_from(args: argparse.Namespace, environ: dict[str, str]) -> Settings:
    path = Path(args.config or environ.get("FLEETLINE_CONFIG") or DEFAULT_CONFIG).expanduser()
    stored: dict[str, Any] = {}
    if path.is_file():
        try:
            stored = tomllib.loads(path.read_text())
        except (tomllib.TOMLDecodeError, OSError) as error:
            raise CliError(f"Cannot read the config file {path}: {error}", EXIT_USAGE) from error
    url = args.url or environ.get("FLEETLINE_URL") or str(stored.get("url") or "")
    token = args.token or environ.get("FLEETLINE_TOKEN") or str(stored.get("token") or "")
    if not url:
        raise CliError(f'No server URL: pass --url, set FLEETLINE_URL, or put url = "..." in {path}.', EXIT_USAGE)
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise CliError(f"The server URL must start with http:// or https://, not {url!r}.", EXIT_USAGE)
    if not token:
        raise CliError(
            f"No API token: make one at {url.rstrip('/')}/settings/tokens/ and set FLEETLINE_TOKEN.", EXIT_AUTH
        )
    return Settings(url=url.rstrip("/"), token=token)


@dataclass
class Api:
    settings: Settings

    def call(
        self, method: str, path: str, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None
    ) -> Any:
        url = path if path.startswith("http") else f"{self.settings.url}/api/v1/{path.lstrip('/')}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.settings.token}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                return self._decode(response.status, response.headers.get("Content-Type", ""), response.read())
        except urllib.error.HTTPError as error:
            raise self._refusal(error) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise CliError(
                f"Cannot reach Fleetline at {self.settings.url}: {reason}. Check the URL (FLEETLINE_URL).",
                EXIT_UNREACHABLE,
            ) from None

    def _decode(self, status: int, content_type: str, raw: bytes) -> Any:
        if status == 204:
            return None
        if "json" not in content_type:
            raise CliError(
                f"{self.settings.url} answered HTTP {status} with {content_type or 'no content type'}, not the "
                "Fleetline API: check the URL (FLEETLINE_URL).",
                EXIT_UNREACHABLE,
            )
        return json.loads(raw)

    def _refusal(self, error: urllib.error.HTTPError) -> CliError:
        status = error.code
        body: Any = None
        if "json" in (error.headers.get("Content-Type") or ""):
            try:
                body = json.loads(error.read())
            except ValueError:
                body = None
        if body is None or not isinstance(body, dict) or "errors" not in body:
            if status == 404:
                return CliError(
                    f"{self.settings.url} has no Fleetline API v1 here (HTTP 404): check the URL (FLEETLINE_URL).",
                    EXIT_UNREACHABLE,
                )
            return CliError(f"The server answered HTTP {status} {error.reason}.", EXIT_SERVER)
        problems = "; ".join(
            f"{problem['attr']}: {problem['detail']}"
            if problem.get("attr") not in (None, "", "non_field_errors")
            else str(problem.get("detail"))
            for problem in body["errors"]
        )
        if status == 401:
            return CliError(
                f"The server refused the token ({problems}). Make a new one at {self.settings.url}/settings/tokens/.",
                EXIT_AUTH,
            )
        if status in (429, 503):
            after = error.headers.get("Retry-After")
            return CliError(f"Busy: {problems}" + (f" Retry in {after} s." if after else ""), EXIT_BUSY)
        return CliError(f"Refused (HTTP {status}): {problems}", EXIT_FOR_STATUS.get(status, EXIT_SERVER))

    def pages(self, path: str, limit: int) -> Iterator[dict[str, Any]]:
        """Every row of a cursor-paged list, following ``next`` until ``limit`` rows."""
        url: str | None = path
        count = 0
        while url and count < limit:
            page = self.call("GET", url)
            for row in page["results"]:
                if count >= limit:
                    return
                count += 1
                yield row
            url = page.get("next")


# Output ------------------------------------------------------------------------------------------


def duration_text(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if days:
        return f"{days}d{hours}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m" if minutes else f"{seconds}s"


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str], out: TextIO) -> None:
    cells = [[("-" if value is None else str(value)) for value in row] for row in rows]
    widths = [max([len(header), *(len(row[i]) for row in cells)]) for i, header in enumerate(headers)]
    for row in [list(headers), *cells]:
        out.write("  ".join(value.ljust(width) for value, width in zip(row, widths, strict=True)).rstrip() + "\n")


def emit(args: argparse.Namespace, out: TextIO, data: Any, render: Callable[[], object]) -> None:
    if args.json:
        out.write(json.dumps(data, indent=2) + "\n")
    else:
        render()


def gpu_count(text: str) -> int:
    """A whole number of GPUs, 0 or more."""
    if not re.fullmatch(r"\s*\d+\s*", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of GPUs (0 or more)")
    return int(text)


def gpu_limit(text: str) -> int | None:
    """A whole number of GPUs, or ``unlimited`` (None)."""
    if text.strip().lower() == "unlimited":
        return None
    if not re.fullmatch(r"\s*\d+\s*", text):
        raise argparse.ArgumentTypeError(f"{text!r} is neither a whole number of GPUs nor 'unlimited'")
    return int(text)


def _positive(text: str, what: str) -> int:
    # ASCII digits only, and no more of them than an id can have (int() would read "٣" too).
    if not re.fullmatch(r"\s*[0-9]{1,18}\s*", text) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what} (a whole number, 1 or more)")
    return int(text)


def job_id(text: str) -> int:
    return _positive(text, "a job id")


def row_limit(text: str) -> int:
    return _positive(text, "a number of rows")


def seconds_from(text: str) -> float:
    """``90``, ``90s``, ``45m``, ``2h``, ``1.5d`` -> seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 3600, 90m, 2h or 1.5d")
    return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]


# Commands ----------------------------------------------------------------------------------------

JOB_COLUMNS = ("JOBID", "NAME", "TEAM", "STATE", "GPUS", "ACCEL", "PRIORITY", "USER")


def _job_row(job: dict[str, Any]) -> list[Any]:
    return [
        job["id"],
        job["name"],
        job["team"],
        job["state"],
        job["gpus"],
        job["accelerator"],
        job["priority_class"],
        job["submitted_by"],
    ]


def _query(**values: Any) -> str:
    pairs = [
        (key, item)
        for key, value in values.items()
        if value
        for item in (value if isinstance(value, list) else [value])
    ]
    return urllib.parse.urlencode(pairs)


def _command(args: argparse.Namespace) -> str | None:
    """The command a real backend runs: --command as given, or the text of --script."""
    if args.script is not None:
        with open(args.script, encoding="utf-8") as script:
            return script.read()
    return args.job_command


def cmd_submit(api: Api, args: argparse.Namespace, out: TextIO) -> int:
    body = {
        "team": args.team,
        "name": args.name,
        "kind": args.kind,
        "priority_class": args.priority_class,
        "accelerator": args.accelerator,
        "gpus": args.gpus,
        "duration_s": args.duration,
        "time_limit_s": args.time_limit,
        "min_gpus": args.min_gpus,
        "max_gpus": args.max_gpus,
        "checkpoint_interval_s": args.checkpoint_interval,
        "checkpoint_gb": args.checkpoint_gb,
        "checkpoint_on_preempt": args.checkpoint_on_preempt,
        "required_level": args.required_level,
        "preferred_level": args.preferred_level,
        "command": _command(args),
    }
    body = {key: value for key, value in body.items() if value is not None}
    # A key per invocation: if the answer is lost, running the same command with --idempotency-key
    # set to the printed key cannot make a second job.
    key = args.idempotency_key or str(uuid.uuid4())
    job = api.call("POST", "jobs/", body, headers={"Idempotency-Key": key})
    emit(args, out, job, lambda: out.write(f"Submitted job {job['id']} ({job['name']}), {job['state']}.\n"))
    return EXIT_OK


def cmd_queue(api: Api, args: argparse.Namespace, out: TextIO) -> int:
    rows = list(api.pages("jobs/?" + _query(state="pending", team=args.team, page_size=200), args.limit))
    now_s = api.call("GET", "clock/")["now_s"]

    def render() -> None:
        table(
            [
                [
                    *_job_row(job)[:3],
                    job["gpus"],
                    job["accelerator"],
                    job["priority_class"],
                    (job["pending"] or {}).get("reason"),
                    _start_text(job, now_s),
                ]
                for job in rows
            ],
            ("JOBID", "NAME", "TEAM", "GPUS", "ACCEL", "PRIORITY", "REASON", "START"),
            out,
        )

    emit(args, out, rows, render)
    return EXIT_OK


def _start_text(job: dict[str, Any], now_s: float) -> str:
    pending = job.get("pending") or {}
    if pending.get("estimated_start_s") is not None:
        return "in " + duration_text(pending["estimated_start_s"] - now_s)
    return pending.get("waits_for") or "-"


def cmd_jobs(api: Api, args: argparse.Namespace, out: TextIO) -> int:
    query = _query(
        state=args.state,
        team=args.team,
        user=args.user,
        kind=args.kind,
        accelerator=args.accelerator,
        page_size=min(args.limit, 200),
    )
    rows = list(api.pages(f"jobs/?{query}", args.limit))
    emit(args, out, rows, lambda: table([_job_row(job) for job in rows], JOB_COLUMNS, out))
    return EXIT_OK


def cmd_show(api: Api, args: argparse.Namespace, out: TextIO) -> int:
    job = api.call("GET", f"jobs/{args.job}/")
    events = api.call("GET", f"jobs/{args.job}/events/")
    now_s = api.call("GET", "clock/")["now_s"] if job.get("pending") else 0.0

    def render() -> None:
        pending = job.get("pending") or {}
        fields = [
            ("job", f"{job['id']} {job['name']}"),
            ("team", job["team"]),
            ("state", job["state"]),
            ("gpus", f"{job['gpus']} x {job['accelerator']}"),
            ("priority", job["priority_class"]),
            ("duration", duration_text(job["duration_s"])),
            ("time limit", duration_text(job["time_limit_s"])),
            ("submitted by", job["submitted_by"] or "-"),
            ("waits because", pending.get("explanation") or pending.get("reason") or "-"),
            ("starts", _start_text(job, now_s) if pending else "-"),
            ("nodes", ", ".join(f"{n['node']} ({n['gpus']})" for n in job.get("nodes", [])) or "-"),
        ]
        for name, value in fields:
            out.write(f"{name:>14}: {value}\n")
        out.write("\n")
        table([[e["sim_time_s"], e["kind"], e["message"]] for e in events], ("FLEET_S", "EVENT", "MESSAGE"), out)

    emit(args, out, {**job, "events": events}, render)
    return EXIT_OK


def cmd_cancel(api: Api, args: argparse.Namespace, out: TextIO) -> int:
    job = api.call("POST", f"jobs/{args.job}/cancel/")
    emit(args, out, job, lambda: out.write(f"Cancelled job {job['id']} ({job['name']}).\n"))
    return EXIT_OK


def cmd_quota(api: Api, args: argparse.Namespace, out: TextIO) -> int:
    slugs = [args.team] if args.team else [team["slug"] for team in api.call("GET", "teams/")]
    quotas = {slug: api.call("GET", f"teams/{urllib.parse.quote(slug)}/quotas/") for slug in slugs}

    def render() -> None:
        rows = [
            [
                slug,
                q["accelerator"],
                q["guaranteed"],
                "unlimited" if q["borrow_limit"] is None else q["borrow_limit"],
                q["in_use"],
                q["borrowed"],
                q["lent"],
                q["fleet_gpus"],
            ]
            for slug, rows in quotas.items()
            for q in rows
        ]
        table(rows, ("TEAM", "ACCEL", "GUARANTEED", "BORROW_LIMIT", "IN_USE", "BORROWED", "LENT", "FLEET"), out)

    emit(args, out, quotas, render)
    return EXIT_OK


def _limit_text(limit: int | None) -> str:
    return "unlimited" if limit is None else str(limit)


def cmd_quota_set(api: Api, args: argparse.Namespace, out: TextIO) -> int:
    body = {
        "guaranteed": args.guaranteed,
        "borrow_limit": args.borrow_limit,
        "lend_limit": args.lend_limit,
        "reason": args.reason,
    }
    path = f"teams/{urllib.parse.quote(args.team, safe='')}/quotas/{urllib.parse.quote(args.accelerator, safe='')}/"
    quota = api.call("PUT", path, body)
    emit(
        args,
        out,
        quota,
        lambda: out.write(
            f"Set the {quota['accelerator']} quota of {args.team}: {quota['guaranteed']} guaranteed, "
            f"borrow limit {_limit_text(quota['borrow_limit'])}, lend limit {_limit_text(quota['lend_limit'])} "
            f"(in use {quota['in_use']} of {quota['fleet_gpus']} in the fleet).\n"
        ),
    )
    return EXIT_OK


def cmd_request_quota(api: Api, args: argparse.Namespace, out: TextIO) -> int:
    body = {
        "team": args.team,
        "accelerator": args.accelerator,
        "guaranteed": args.guaranteed,
        "borrow_limit": args.borrow_limit,
        "lend_limit": args.lend_limit,
        "justification": args.justification,
    }
    request = api.call("POST", "quota-requests/", {k: v for k, v in body.items() if v is not None})
    emit(
        args,
        out,
        request,
        lambda: out.write(
            f"Requested {request['guaranteed']} guaranteed {request['accelerator']} GPUs for {request['team']} "
            f"(request {request['id']}, {request['state']}).\n"
        ),
    )
    return EXIT_OK


def cmd_usage(api: Api, args: argparse.Namespace, out: TextIO) -> int:
    report = api.call("GET", "reports/usage/?" + _query(start=args.start, end=args.end))

    def render() -> None:
        currency = report["currency"]
        table(
            [
                [
                    r["team"],
                    f"{r['used_gpu_h']:.1f}",
                    f"{r['useful_gpu_h']:.1f}",
                    f"{r['lost_gpu_h']:.1f}",
                    f"{r['borrowed_gpu_h']:.1f}",
                    f"{r['guarantee_gpu_h']:.1f}",
                    f"{r['cost']} {currency}",
                ]
                for r in report["rows"]
            ],
            ("TEAM", "USED_H", "USEFUL_H", "LOST_H", "BORROWED_H", "GUARANTEE_H", "COST"),
            out,
        )
        period = f"{report['start']}..{report['end']}" + (" (closed month)" if report["closed"] else "")
        fleet = report["fleet"]
        if fleet is None:
            out.write(f"\n{period}\n")
            return
        out.write(
            f"\nFleet {period}: capacity {fleet['capacity_gpu_h']:.1f} GPU-h, utilisation "
            f"{fleet['utilisation']:.1%}, idle {fleet['idle_gpu_h']:.1f}, down {fleet['down_gpu_h']:.1f}\n"
        )

    emit(args, out, report, render)
    return EXIT_OK


# Arguments ---------------------------------------------------------------------------------------


def _common_options(*, defaults: bool) -> argparse.ArgumentParser:
    """The options every command takes, before or after its name. After the name they default to
    nothing, so that they do not undo the same option given before it."""
    common = argparse.ArgumentParser(add_help=False)
    extra: dict[str, Any] = {} if defaults else {"default": argparse.SUPPRESS}
    common.add_argument("--url", help="server, e.g. https://fleet.example.com (or FLEETLINE_URL)", **extra)
    common.add_argument("--token", help="API token (or FLEETLINE_TOKEN)", **extra)
    common.add_argument("--config", help=f"config file (or FLEETLINE_CONFIG; default {DEFAULT_CONFIG})", **extra)
    common.add_argument("--json", action="store_true", help="print JSON instead of a table", **extra)
    return common


def _submit_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    submit = commands.add_parser("submit", parents=[common], help="submit a job")
    submit.add_argument("--team", required=True, help="team slug")
    submit.add_argument("--name", required=True)
    submit.add_argument("--gpus", required=True, type=int, help="gang size")
    submit.add_argument(
        "--duration",
        type=seconds_from,
        help="work at full size: 3600, 90m, 2h, 1d (required on a modelled fleet; a real one plans with --time-limit)",
    )
    submit.add_argument("--kind", default="training", choices=["training", "serving", "batch"])
    submit.add_argument("--priority-class", default="training", help="priority class name")
    submit.add_argument("--accelerator", default="H100", help="accelerator type name")
    submit.add_argument("--time-limit", type=seconds_from)
    submit.add_argument("--min-gpus", type=int)
    submit.add_argument("--max-gpus", type=int)
    submit.add_argument("--checkpoint-interval", type=seconds_from)
    submit.add_argument("--checkpoint-gb", type=float)
    submit.add_argument("--checkpoint-on-preempt", action="store_true", default=None)
    submit.add_argument("--required-level", choices=["node", "rack", "pod", "fleet"])
    submit.add_argument("--preferred-level", choices=["node", "rack", "pod", "fleet"])
    what = submit.add_mutually_exclusive_group()
    what.add_argument(
        "--command", dest="job_command", help="real backend: the command line every node of the gang runs"
    )
    what.add_argument("--script", help="real backend: a batch script file every node of the gang runs")
    submit.add_argument("--idempotency-key", help="resend a submission whose answer was lost")
    submit.set_defaults(run=cmd_submit)


def parser() -> argparse.ArgumentParser:
    common = _common_options(defaults=False)
    main = argparse.ArgumentParser(
        prog="fleetline", description="Fleetline from the command line.", parents=[_common_options(defaults=True)]
    )
    commands = main.add_subparsers(dest="command", required=True, metavar="COMMAND")

    _submit_parser(commands, common)

    queue = commands.add_parser("queue", parents=[common], help="pending jobs: why they wait, when they start")
    queue.add_argument("--team")
    queue.add_argument("--limit", type=row_limit, default=500, help="at most this many jobs (default 500)")
    queue.set_defaults(run=cmd_queue)

    jobs = commands.add_parser("jobs", parents=[common], help="jobs you may see, newest first")
    jobs.add_argument(
        "--state",
        action="append",
        choices=["pending", "running", "completed", "cancelled", "timed_out"],
    )
    jobs.add_argument("--team")
    jobs.add_argument("--user")
    jobs.add_argument("--kind", choices=["training", "serving", "batch"])
    jobs.add_argument("--accelerator")
    jobs.add_argument("--limit", type=row_limit, default=100, help="at most this many jobs (default 100)")
    jobs.set_defaults(run=cmd_jobs)

    for name, helptext, run in (("show", "one job and its history", cmd_show), ("cancel", "cancel a job", cmd_cancel)):
        command = commands.add_parser(name, parents=[common], help=helptext)
        command.add_argument("job", type=job_id, metavar="JOB")
        command.set_defaults(run=run)

    quota = commands.add_parser("quota", parents=[common], help="quota and use of a team (default: all yours)")
    quota.add_argument("team", nargs="?", metavar="TEAM")
    quota.set_defaults(run=cmd_quota)

    quota_set = commands.add_parser(
        "quota-set",
        parents=[common],
        help="set a team's quota for one accelerator type (fleet admins)",
        description="Replace the team's guarantee and limits for ACCELERATOR at once, within the fleet's "
        "capacity times the policy's overcommit ratio; audited, and the team's leads are told. A limit "
        "left out is unlimited, as in the API's PUT.",
    )
    quota_set.add_argument("team", metavar="TEAM", help="team slug")
    quota_set.add_argument("accelerator", metavar="ACCELERATOR", help="accelerator type name, e.g. H100")
    quota_set.add_argument(
        "--guaranteed", required=True, type=gpu_count, metavar="N", help="GPUs guaranteed to the team"
    )
    quota_set.add_argument(
        "--borrow-limit",
        type=gpu_limit,
        metavar="N|unlimited",
        help="GPUs it may borrow above its guarantee, or 'unlimited' (default)",
    )
    quota_set.add_argument(
        "--lend-limit",
        type=gpu_limit,
        metavar="N|unlimited",
        help="GPUs of its guarantee others may borrow, or 'unlimited' (default)",
    )
    quota_set.add_argument("--reason", required=True, help="why: kept in the audit log and sent to the leads")
    quota_set.set_defaults(run=cmd_quota_set)

    request = commands.add_parser("request-quota", parents=[common], help="ask for a team's quota (leads)")
    request.add_argument("--team", required=True)
    request.add_argument("--accelerator", required=True)
    request.add_argument("--guaranteed", required=True, type=int)
    request.add_argument("--borrow-limit", type=int)
    request.add_argument("--lend-limit", type=int)
    request.add_argument("--justification", required=True)
    request.set_defaults(run=cmd_request_quota)

    usage = commands.add_parser("usage", parents=[common], help="GPU-hours and cost per team (finance, admins, leads)")
    usage.add_argument("--start", required=True, help="YYYY-MM-DD")
    usage.add_argument("--end", required=True, help="YYYY-MM-DD")
    usage.set_defaults(run=cmd_usage)
    return main


def main(
    argv: Sequence[str] | None = None,
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
    environ: dict[str, str] | None = None,
) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    try:
        args = parser().parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    try:
        api = Api(settings_from(args, dict(os.environ) if environ is None else environ))
        return int(args.run(api, args, out))
    except CliError as error:
        err.write(f"fleetline: {error}\n")
        return error.code
    except (KeyError, TypeError, ValueError) as error:
        err.write(f"fleetline: the server's answer was not what this command expects ({error!r}).\n")
        return EXIT_SERVER


def run() -> NoReturn:
    sys.exit(main())


if __name__ == "__main__":
    run()
