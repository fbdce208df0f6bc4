"""A thin, typed, synchronous client for slurmrestd (Slurm 22.05, OpenAPI ``v0.0.38``).

It signs its own JWTs (HS256) with the cluster's ``jwt_key`` file, so a service that holds the key
acts as any cluster user: a job submitted with user X's token runs as X. No Django here.

What slurmrestd ``v0.0.38`` cannot do is done with Slurm's own commands (``scontrol``, ``scancel``,
``sacct``), run without a shell with ``SLURM_CONF`` (the ``slurm_conf`` argument, else the
environment's) and a token in ``SLURM_JWT`` (so they need no munge and run as the admin user):
node drain/resume (v0.0.38 has no node update), requeue, signalling the batch shell only, the
switch topology, ``requeue=False`` at submit (the REST field is accepted and ignored) and
accounting (``dbv0.0.38`` reports every exit code as 0; ``sacct`` has them right).

Facts checked on the development cluster (``deploy/slurm/README.md``): ``"exclusive": "exclusive"``
(``"true"`` is refused), ``"nodelist"`` (the documented ``required_nodes`` is refused), a held
submit answers 200 with the informational error 2042, a job's ``exit_code`` is the raw wait
status (``3 << 8`` for ``exit 3``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

API = "/slurm/v0.0.38"
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
# Answers that come with a 200 and an "error" that is only information.
INFORMATIONAL_ERRORS = frozenset({2042})  # "Job is in held state, pending scheduler release"
INVALID_JOB_ID = 2017
# Job states in which a job is still there (its end time and exit code mean nothing yet).
LIVE_STATES = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING"})
TOKEN_LIFESPAN_S = 900
TOKEN_RENEW_BEFORE_S = 120


class SlurmError(Exception):
    """An error answer from slurmrestd or a Slurm command, with the text Slurm gave."""

    def __init__(self, message: str, *, status: int | None = None, codes: Sequence[int] = ()) -> None:
        super().__init__(message)
        self.status = status
        self.codes = tuple(codes)


@dataclass(frozen=True, slots=True)
class SlurmNode:
    name: str
    gpus: int
    gres_type: str  # "h100" for gres gpu:h100:8, "" for an untyped gpu:8
    states: frozenset[str]  # base state and flags, upper case: IDLE, MIXED, DRAIN, NOT_RESPONDING...
    reason: str
    cpus: int = 0
    alloc_cpus: int = 0
    gpus_used: int = 0


@dataclass(frozen=True, slots=True)
class SlurmJob:
    job_id: int
    name: str
    user: str
    state: str  # PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL...
    reason: str
    held: bool
    nodes: tuple[str, ...]
    exit_code: int | None  # None while live; 128 + N when killed by signal N
    signal: int | None
    submit_unix: int | None
    start_unix: int | None
    end_unix: int | None  # None while live
    restarts: int
    comment: str = ""
    requeue: bool = True
    required_nodes: tuple[str, ...] = ()  # the node list it was submitted with


@dataclass(frozen=True, slots=True)
class AccountingJob:
    """One attempt of a job as slurmdbd recorded it (a requeued job has one record per attempt)."""

    job_id: int
    name: str
    user: str
    state: str
    start_unix: int | None
    end_unix: int | None
    elapsed_s: int
    gpus: int
    exit_code: int
    signal: int
    nodes: tuple[str, ...] = field(default=())


# Hostlists ----------------------------------------------------------------------------------------
def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets: "a[1-2],b" -> ["a[1-2]", "b"]."""
    parts: list[str] = []
    depth, start = 0, 0
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [part for part in parts if part]


def hostlist_expand(text: str) -> list[str]:
    """Slurm's compressed host list expanded: "node[01-03,07],gpu5" -> node01 node02 node03 node07 gpu5."""
    names: list[str] = []
    for part in _split_top(text.strip()):
        match = re.fullmatch(r"([^\[]*)\[([^\]]+)\](.*)", part)
        if not match:
            names.append(part)
            continue
        prefix, ranges, rest = match.groups()
        for item in ranges.split(","):
            low, _, high = item.partition("-")
            if not high:
                heads = [low]
            else:
                heads = [str(n).zfill(len(low)) for n in range(int(low), int(high) + 1)]
            for head in heads:
                names.extend(hostlist_expand(prefix + head + rest) if "[" in rest else [prefix + head + rest])
    return names


def gres_gpus(gres: str) -> tuple[int, str]:
    """GPUs and their type in a gres string: "gpu:h100:8(S:0-1),shard:4" -> (8, "h100")."""
    total, kind = 0, ""
    for entry in _split_top(re.sub(r"\([^)]*\)", "", gres)):
        fields = entry.split(":")
        if fields[0] != "gpu" or len(fields) < 2 or not fields[-1].isdigit():
            continue
        total += int(fields[-1])
        if len(fields) >= 3:
            kind = kind or fields[1]
    return total, kind


def _wait_status(raw: int) -> tuple[int, int]:
    """(exit code, signal) of a wait status; a signal N gives exit code 128 + N as a shell does."""
    signal = raw & 0x7F
    return (128 + signal, signal) if signal else ((raw >> 8) & 0xFF, 0)


def _b64url(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def jwt_sign(key: bytes, user: str, *, lifespan_s: int = TOKEN_LIFESPAN_S, now: float | None = None) -> str:
    """A token as ``scontrol token`` makes it: HS256 over {"exp", "iat", "sun"}."""
    issued = int(time.time() if now is None else now)
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    payload = _b64url(
        json.dumps({"exp": issued + lifespan_s, "iat": issued, "sun": user}, separators=(",", ":")).encode()
    )
    signing_input = header + b"." + payload
    signature = _b64url(hmac.new(key, signing_input, hashlib.sha256).digest())
    return (signing_input + b"." + signature).decode()


# The client ---------------------------------------------------------------------------------------
class SlurmClient:
    def __init__(
        self,
        base_url: str,
        jwt_key_path: str | os.PathLike[str],
        admin_user: str = "root",
        timeout_s: float = 5.0,
        *,
        slurm_conf: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.jwt_key_path = Path(jwt_key_path)
        self.admin_user = admin_user
        self.timeout_s = timeout_s
        self.slurm_conf = slurm_conf
        self._key: bytes | None = None
        self._tokens: dict[str, tuple[str, float]] = {}
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout_s, transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SlurmClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # Auth -----------------------------------------------------------------------------------------
    def token_for(self, user: str) -> str:
        """A token for ``user``, reused until shortly before it expires."""
        cached = self._tokens.get(user)
        now = time.time()
        if cached and cached[1] - now > TOKEN_RENEW_BEFORE_S:
            return cached[0]
        if self._key is None:
            try:
                self._key = self.jwt_key_path.read_bytes()
            except OSError as error:
                raise SlurmError(f"cannot read the JWT key {self.jwt_key_path}: {error}") from error
        token = jwt_sign(self._key, user, lifespan_s=TOKEN_LIFESPAN_S, now=now)
        self._tokens[user] = (token, now + TOKEN_LIFESPAN_S)
        return token

    # HTTP -----------------------------------------------------------------------------------------
    def _request(
        self,
        method: str,
        path: str,
        *,
        user: str | None = None,
        body: Mapping[str, Any] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        user = user or self.admin_user
        headers = {"X-SLURM-USER-NAME": user, "X-SLURM-USER-TOKEN": self.token_for(user)}
        try:
            response = self._http.request(method, path, headers=headers, json=body, params=params)
        except httpx.HTTPError as error:
            raise SlurmError(f"{method} {path}: {error.__class__.__name__}: {error}") from error
        try:
            data = response.json()
        except ValueError:
            data = None
        if not isinstance(data, dict):
            text = response.text.strip()[:300] or response.reason_phrase
            raise SlurmError(f"{method} {path}: HTTP {response.status_code}: {text}", status=response.status_code)
        errors = [e for e in data.get("errors") or () if isinstance(e, dict)]
        codes = [int(e.get("error_number") or e.get("error_code") or e.get("errno") or 0) for e in errors]
        fatal = [e for e, code in zip(errors, codes, strict=True) if code not in INFORMATIONAL_ERRORS]
        if response.status_code >= 400 or fatal:
            text = "; ".join(str(e.get("description") or e.get("error") or e) for e in fatal or errors)
            raise SlurmError(
                f"{method} {path}: HTTP {response.status_code}: {text or response.reason_phrase}",
                status=response.status_code,
                codes=codes,
            )
        return data

    def ping(self) -> bool:
        pings = self._request("GET", f"{API}/ping").get("pings") or []
        return any(p.get("ping") == "UP" for p in pings)

    # Commands -------------------------------------------------------------------------------------
    def _command(self, *argv: str, user: str | None = None) -> str:
        env = dict(os.environ)
        if self.slurm_conf:
            env["SLURM_CONF"] = self.slurm_conf
        env["SLURM_JWT"] = self.token_for(user or self.admin_user)
        try:
            done = subprocess.run(
                list(argv), env=env, capture_output=True, text=True, timeout=max(10.0, 3 * self.timeout_s), check=False
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise SlurmError(f"{argv[0]}: {error}") from error
        if done.returncode != 0:
            text = (done.stderr.strip() or done.stdout.strip())[:500]
            raise SlurmError(f"{' '.join(argv[:3])}: exit {done.returncode}: {text}")
        return done.stdout

    # Nodes ----------------------------------------------------------------------------------------
    def nodes(self) -> list[SlurmNode]:
        return [_node(raw) for raw in self._request("GET", f"{API}/nodes").get("nodes") or []]

    def drain(self, node: str, reason: str) -> None:
        """Drain a node (no new jobs; running ones go on). v0.0.38 has no node update: scontrol."""
        self._command("scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}")

    def resume(self, node: str) -> None:
        self._command("scontrol", "update", f"NodeName={node}", "State=RESUME")

    def topology(self) -> dict[str, tuple[str, str]]:
        """Each node's (rack, pod): its leaf switch and that switch's parent (the leaf itself when
        it has none). Nodes under no switch are left out."""
        return topology_parse(self._command("scontrol", "show", "topology"))

    # Jobs -----------------------------------------------------------------------------------------
    def submit(  # noqa: PLR0913 (keyword-only: a job's description)
        self,
        *,
        user: str,
        name: str,
        script: str,
        cwd: str,
        nodelist: Sequence[str] | None = None,
        nodes: int | None = None,
        gpus_per_node: int = 0,
        exclusive: bool = False,
        time_limit_min: int | None = None,
        partition: str | None = None,
        env: Mapping[str, str] | None = None,
        stdout: str | None = None,
        stderr: str | None = None,
        comment: str = "",
        hold: bool = False,
        requeue: bool | None = None,
    ) -> int:
        """Submit a batch job as ``user``; returns its id. The script is sent as data. The job's
        environment is ``env`` over a plain PATH (nothing of this process's). ``requeue=False``
        forbids Slurm to requeue it (a node failure then ends it NODE_FAIL)."""
        job: dict[str, Any] = {
            "name": name,
            "current_working_directory": cwd,
            "environment": {"PATH": DEFAULT_PATH, **(env or {})},
        }
        count = nodes if nodes is not None else (len(nodelist) if nodelist else None)
        optional: dict[str, Any] = {
            "nodelist": ",".join(nodelist) if nodelist else None,
            "nodes": count,
            "gres": f"gpu:{gpus_per_node}" if gpus_per_node else None,
            "exclusive": "exclusive" if exclusive else None,  # "true" is refused
            "time_limit": None if time_limit_min is None else int(time_limit_min),
            "partition": partition or None,
            "standard_output": stdout or None,
            "standard_error": stderr or None,
            "comment": comment or None,
            "hold": True if hold else None,
        }
        job.update({key: value for key, value in optional.items() if value is not None})
        data = self._request("POST", f"{API}/job/submit", user=user, body={"script": script, "job": job})
        job_id = data.get("job_id")
        if not isinstance(job_id, int):
            raise SlurmError(f"submit of {name!r} answered no job id: {data.get('errors')}")
        if requeue is not None:
            self._command("scontrol", "update", f"JobId={job_id}", f"Requeue={int(requeue)}")
        return job_id

    def job(self, job_id: int) -> SlurmJob | None:
        """The job, or None when slurmctld no longer knows it (MinJobAge after its end)."""
        try:
            data = self._request("GET", f"{API}/job/{job_id}")
        except SlurmError as error:
            if INVALID_JOB_ID in error.codes:
                return None
            raise
        jobs = data.get("jobs") or []
        return _job(jobs[0]) if jobs else None

    def jobs(self, name_prefix: str = "") -> list[SlurmJob]:
        """Every job slurmctld knows (live ones, and ended ones for MinJobAge)."""
        raw = self._request("GET", f"{API}/jobs").get("jobs") or []
        return [_job(j) for j in raw if str(j.get("name") or "").startswith(name_prefix)]

    def release(self, job_id: int, *, user: str | None = None) -> None:
        self._request("POST", f"{API}/job/{job_id}", user=user, body={"hold": False})

    def release_all(self, job_ids: Sequence[int]) -> None:
        """Release many held jobs with one command per thousand (``scontrol release``), as the
        admin: one call instead of one request per job. Raises SlurmError when any of them could
        not be released (the others are)."""
        for start in range(0, len(job_ids), 1000):
            self._command("scontrol", "release", ",".join(str(job_id) for job_id in job_ids[start : start + 1000]))

    def hold(self, job_id: int, *, user: str | None = None) -> None:
        self._request("POST", f"{API}/job/{job_id}", user=user, body={"hold": True})

    def cancel(self, job_id: int, *, user: str | None = None) -> None:
        self._request("DELETE", f"{API}/job/{job_id}", user=user)

    def signal(self, job_id: int, signal: str, *, batch_only: bool = True, user: str | None = None) -> None:
        """Send a signal: to the batch shell only (``scancel --batch``: a batch script that runs its
        work with ``exec srun`` has srun forward it to every task once), or with
        ``batch_only=False`` to the batch shell and every step (REST ``DELETE ?signal=``)."""
        name = signal.upper().removeprefix("SIG")
        if batch_only:
            self._command("scancel", "--batch", f"--signal={name}", str(job_id), user=user)
        else:
            self._request("DELETE", f"{API}/job/{job_id}", user=user, params={"signal": name})

    def requeue(self, job_id: int) -> None:
        """Back to pending (restart count + 1). Slurm makes it eligible only after ~121 s unless
        its StartTime is moved (``scontrol update JobId=N StartTime=now``, at least ~2 s later)."""
        self._command("scontrol", "requeue", str(job_id))

    # Accounting -----------------------------------------------------------------------------------
    def accounting_jobs(self, start_unix: float, end_unix: float, *, name_prefix: str = "") -> list[AccountingJob]:
        """Every attempt of every job that was eligible or ran between the two times (sacct)."""
        out = self._command(
            "sacct",
            "--allusers",
            "--allocations",
            "--duplicates",
            "--noheader",
            "--parsable2",
            f"--delimiter={_SEP}",
            f"--starttime={_local_iso(start_unix)}",
            f"--endtime={_local_iso(end_unix)}",
            f"--format={','.join(_SACCT_FIELDS)}",
        )
        records = [_accounting(line) for line in out.splitlines() if line.strip()]
        return [r for r in records if r is not None and r.name.startswith(name_prefix)]


_SEP = "\x1f"
_SACCT_FIELDS = (
    "JobIDRaw",
    "User",
    "Start",
    "End",
    "ElapsedRaw",
    "AllocTRES",
    "State",
    "ExitCode",
    "NodeList",
    "JobName",
)


def _local_iso(unix: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(unix))


def _sacct_time(text: str) -> int | None:
    """sacct's local ISO time to Unix (None for Unknown/None)."""
    try:
        return int(time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def _accounting(line: str) -> AccountingJob | None:
    fields = line.split(_SEP, len(_SACCT_FIELDS) - 1)
    if len(fields) != len(_SACCT_FIELDS) or not fields[0].isdigit():
        return None
    job_id, user, start, end, elapsed, tres, state, exit_code, nodelist, name = fields
    gpus = 0
    for item in tres.split(","):
        key, _, value = item.partition("=")
        if key == "gres/gpu" and value.isdigit():
            gpus = int(value)
    code, _, sig = exit_code.partition(":")
    return AccountingJob(
        job_id=int(job_id),
        name=name,
        user=user,
        state=state.split()[0] if state else "",
        start_unix=_sacct_time(start),
        end_unix=_sacct_time(end),
        elapsed_s=int(elapsed) if elapsed.isdigit() else 0,
        gpus=gpus,
        exit_code=int(code) if code.isdigit() else 0,
        signal=int(sig) if sig.isdigit() else 0,
        nodes=tuple(hostlist_expand(nodelist)) if nodelist and nodelist != "None assigned" else (),
    )


def _node(raw: Mapping[str, Any]) -> SlurmNode:
    gpus, kind = gres_gpus(str(raw.get("gres") or ""))
    used, _ = gres_gpus(str(raw.get("gres_used") or ""))
    states = {str(raw.get("state") or "").upper()} | {str(flag).upper() for flag in raw.get("state_flags") or ()}
    return SlurmNode(
        name=str(raw["name"]),
        gpus=gpus,
        gres_type=kind,
        states=frozenset(s for s in states if s),
        reason=str(raw.get("reason") or ""),
        cpus=int(raw.get("cpus") or 0),
        alloc_cpus=int(raw.get("alloc_cpus") or 0),
        gpus_used=used,
    )


def _unix(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and value > 0 else None


def _job(raw: Mapping[str, Any]) -> SlurmJob:
    state = str(raw.get("job_state") or "").upper()
    live = state in LIVE_STATES
    reason = str(raw.get("state_reason") or "")
    exit_code: int | None = None
    signal: int | None = None
    if not live and isinstance(raw.get("exit_code"), int):
        exit_code, signal = _wait_status(int(raw["exit_code"]))
    nodes = str(raw.get("nodes") or "")
    return SlurmJob(
        job_id=int(raw["job_id"]),
        name=str(raw.get("name") or ""),
        user=str(raw.get("user_name") or ""),
        state=state,
        reason=reason,
        held=state == "PENDING" and (raw.get("priority") == 0 or reason.startswith("JobHeld")),
        nodes=tuple(hostlist_expand(nodes)) if nodes else (),
        exit_code=exit_code,
        signal=signal,
        submit_unix=_unix(raw.get("submit_time")),
        start_unix=_unix(raw.get("start_time")),
        end_unix=None if live else _unix(raw.get("end_time")),
        restarts=int(raw.get("restart_cnt") or 0),
        comment=str(raw.get("comment") or ""),
        required_nodes=tuple(hostlist_expand(str(raw["required_nodes"]))) if raw.get("required_nodes") else (),
        requeue=bool(raw.get("requeue", True)),
    )


def topology_parse(text: str) -> dict[str, tuple[str, str]]:
    """``scontrol show topology`` as {node: (leaf switch, its parent switch or itself)}."""
    switches: list[dict[str, str]] = []
    for line in text.splitlines():
        fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
        if "SwitchName" in fields:
            switches.append(fields)
    parent: dict[str, str] = {}
    for switch in switches:
        for child in _names(switch.get("Switches")):
            parent.setdefault(child, switch["SwitchName"])
    placement: dict[str, tuple[str, str]] = {}
    for switch in switches:
        if switch.get("Level", "0") != "0":
            continue
        leaf = switch["SwitchName"]
        for node in _names(switch.get("Nodes")):
            placement[node] = (leaf, parent.get(leaf, leaf))
    return placement


def _names(hostlist: str | None) -> Iterable[str]:
    return hostlist_expand(hostlist) if hostlist and hostlist != "(null)" else ()
