"""Why each pending job waits and when it should start: the engine's `PendingStatus` for every
queued job of the latest committed plan, with the one thing that holds it (`engine.plan.Blocker`),
kept for the pages and the API. Recomputed by every cycle, so it lives in Redis (one JSON
document, replaced whole after each committed tick), not in the job rows.

Beside it, under its own key, the names of the teams, jobs and nodes the blockers name (a handful
however long the queue: the jobs ahead, the teams whose limits hold, the nodes reserved), so that
a page says "Vision's quota is kept for train-llm (#12)", never "team 1".

Storing a document returns what changed since the one it replaces (`WaitChange`), which the tick
publishes to open pages (`feed.tick_publish`).

"Pending" names one thing in Fleetline: the job state (`Job.State.PENDING`, a job that is queued).
The engine's answer for such a job is a `PendingStatus` in `Plan.pending`; the stored copy that
readers get is a `JobWait`; the pages list a job with its wait as a `selectors.JobRow`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import astuple, dataclass, field
from typing import Any

import redis
from django.conf import settings

from core.redis_pools import shared_redis
from scheduling import engine
from scheduling.engine.plan import Blocker
from scheduling.engine.vocabulary import REASON_NEW

# The document's key: its name predates `JobWait` and stays, so a running fleet keeps its waits.
WAITS_KEY = "fleetline:pending"
NAMES_KEY = "fleetline:pending:names"
# A fresh token with each document: a reader keeps the document it decoded while the token is the
# same, so that a page of 50 jobs does not fetch and decode the waits of a queue of thousands.
# Whoever writes or deletes the document other than `job_waits_store` deletes the token with it.
WAITS_VERSION_KEY = "fleetline:pending:version"
NEW_JOB_REASON = REASON_NEW
# Estimates are shown to the minute: a change within the same minute is no change to publish.
ESTIMATE_GRAIN_S = 60


@dataclass(frozen=True, slots=True)
class WaitNames:
    """Names of what blockers name, by engine id: teams, jobs, nodes."""

    teams: Mapping[str, str] = field(default_factory=dict)
    jobs: Mapping[str, str] = field(default_factory=dict)
    nodes: Mapping[str, str] = field(default_factory=dict)
    # The team of each job named: a job of another team than the waiting one's is told by its team only.
    job_teams: Mapping[str, str] = field(default_factory=dict)


NO_NAMES = WaitNames()


@dataclass(frozen=True, slots=True)
class JobWait:
    reason: str
    estimated_start_s: float | None
    # What the job waits for when there is no estimate to believe (`engine.PendingStatus.waits_for`).
    waits_for: str | None = None
    # The one thing that holds it (`engine.Plan.blockers`); None for a job no cycle has explained.
    blocker: Blocker | None = None
    # The names its blocker and `waits_for` name (`scheduling.live.explanations` says them).
    names: WaitNames = NO_NAMES
    # The waiting job's team (engine id); None in documents written before it was kept.
    team: str | None = None


@dataclass(frozen=True, slots=True)
class WaitChange:
    """A pending job whose reason, estimate (to the minute) or blocker the latest tick changed."""

    job_id: int
    wait: JobWait


def _client() -> redis.Redis:
    return shared_redis(settings.REDIS_URL)


def _entry(status: engine.PendingStatus, blocker: list[Any] | None, team: str | None) -> list[Any]:
    """A job's stored entry (`job_waits_store` builds it inline; a test holds the two alike)."""
    estimate = None if status.estimated_start_s is None else round(status.estimated_start_s)
    return [status.reason, estimate, status.waits_for, blocker, team]


def _facts(blockers: Mapping[str, Blocker]) -> dict[str, list[Any]]:
    """Each blocker's fields, as stored: one list per distinct blocker (a long queue shares a few)."""
    made: dict[int, list[Any]] = {}
    facts = {}
    for job_id, blocker in blockers.items():
        found = made.get(id(blocker))
        if found is None:
            found = made[id(blocker)] = list(astuple(blocker))
        facts[job_id] = found
    return facts


def _same(old: list[Any] | None, new: list[Any]) -> bool:
    """Whether a page would show `old` as it shows `new` (estimates to the minute)."""
    if old is None or len(old) != len(new):
        return False
    (old_reason, old_estimate, *old_rest), (reason, estimate, *rest) = old, new
    return (old_reason, _minute(old_estimate), old_rest) == (reason, _minute(estimate), rest)


def _minute(estimate_s: float | None) -> float | None:
    return None if estimate_s is None else estimate_s // ESTIMATE_GRAIN_S


def job_waits_store(
    *,
    statuses: Iterable[engine.PendingStatus],
    blockers: Mapping[str, Blocker] | None = None,
    names: WaitNames = NO_NAMES,
    team_ids: Mapping[str, str] | None = None,
) -> list[WaitChange]:
    """Replace the waits document with the latest plan's (and the names its blockers name, and
    each job's team by `team_ids`); the jobs whose wait changed since the document it replaces, in
    job id order.

    The process keeps the document it stored last (`_Published`): while the stored token is still
    its own, only the jobs whose entry changed are encoded and compared, and the complete document
    is written in one command without reading the old one back. Otherwise (another writer, a
    deleted or rewritten document, a new process) the old document is read and compared whole."""
    kept = _published.kept
    document, encoded = _encoded(statuses, _facts(blockers or {}), team_ids or {}, kept)
    token = uuid.uuid4().hex
    kept_names = [names.teams, names.jobs, names.nodes, names.job_teams]
    matched, raw = _store_script()(
        keys=[WAITS_KEY, NAMES_KEY, WAITS_VERSION_KEY],
        args=["" if kept is None else kept.token, encoded.text, json.dumps(kept_names, separators=(",", ":")), token],
        client=_client(),
    )
    _published.kept = _Document(token=token, entries=document, fragments=encoded.fragments)
    if matched and kept is not None:
        changed = [
            (job_id, document[job_id])
            for job_id in encoded.changed
            if not _same(kept.entries.get(job_id), document[job_id])
        ]
    else:
        before: dict[str, list[Any]] = json.loads(raw) if raw else {}
        changed = [(job_id, entry) for job_id, entry in document.items() if not _same(before.get(job_id), entry)]
    return [WaitChange(job_id, _wait(entry, names)) for job_id, entry in sorted((int(j), e) for j, e in changed)]


@dataclass(frozen=True, slots=True)
class _Document:
    """A waits document this process stored: its token, entries and each entry's encoded text."""

    token: str
    entries: dict[str, list[Any]]
    fragments: dict[str, str]


class _Published:
    """The waits document this process stored last (the leader's, between its ticks)."""

    def __init__(self) -> None:
        self.kept: _Document | None = None


_published = _Published()


@dataclass(frozen=True, slots=True)
class _Encoded:
    text: str  # the whole document, exactly as ``json.dumps(document, separators=(",", ":"))``
    fragments: dict[str, str]  # each job's ``"id":[...]``
    changed: list[str]  # the jobs whose entry differs from the kept document's (all without one)


def _encoded(
    statuses: Iterable[engine.PendingStatus],
    facts: Mapping[str, list[Any]],
    teams: Mapping[str, str],
    kept: _Document | None,
) -> tuple[dict[str, list[Any]], _Encoded]:
    """Each status's entry (`_entry`, inline: this runs for every job of the queue each tick) and
    the document encoded, re-encoding only the entries that differ from `kept`'s."""
    dumps = _ENCODER.encode
    old_entries = {} if kept is None else kept.entries
    old_fragments = {} if kept is None else kept.fragments
    document: dict[str, list[Any]] = {}
    fragments: dict[str, str] = {}
    changed: list[str] = []
    for status in statuses:
        job_id = status.job_id
        estimate = status.estimated_start_s
        entry = [
            status.reason,
            None if estimate is None else round(estimate),
            status.waits_for,
            facts.get(job_id),
            teams.get(job_id),
        ]
        document[job_id] = entry
        if old_entries.get(job_id) == entry:
            fragments[job_id] = old_fragments[job_id]
        else:
            fragments[job_id] = f"{dumps(job_id)}:{dumps(entry)}"
            changed.append(job_id)
    return document, _Encoded(text="{" + ",".join(fragments.values()) + "}", fragments=fragments, changed=changed)


_ENCODER = json.JSONEncoder(separators=(",", ":"))
# Writes the document, its names and a fresh token in one command. When the stored token is not
# the one this process wrote last, it also returns the document it replaces, to compare against.
_STORE_LUA = """
local matched = ARGV[1] ~= '' and redis.call('GET', KEYS[3]) == ARGV[1]
local old = false
if not matched then old = redis.call('GET', KEYS[1]) end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('SET', KEYS[2], ARGV[3])
redis.call('SET', KEYS[3], ARGV[4])
return {matched and 1 or 0, old}
"""


def _store_script() -> Any:
    return _client().register_script(_STORE_LUA)


def _wait(entry: list[Any], names: WaitNames) -> JobWait:
    reason, estimate, *rest = entry
    waits_for = rest[0] if rest else None  # documents written before it was kept have no third field
    facts = rest[1] if len(rest) > 1 else None
    team = rest[2] if len(rest) > 2 else None
    blocker = None if facts is None else Blocker(*facts)
    return JobWait(reason, None if estimate is None else float(estimate), waits_for, blocker, names, team)


def job_waits_for(*, job_ids: list[int]) -> dict[int, JobWait]:
    """The latest cycle's reason, estimate and blocker for each job; new jobs wait for their first cycle."""
    if not job_ids:
        return {}
    client = _client()
    version, raw_names = client.mget([WAITS_VERSION_KEY, NAMES_KEY])
    document = _documents.get(version)
    if document is None:
        raw, version = client.mget([WAITS_KEY, WAITS_VERSION_KEY])
        document = json.loads(raw) if raw else {}
        _documents.keep(version, document)
    kept = json.loads(raw_names) if raw_names else []
    names = WaitNames(*kept[:4])
    return {job_id: _wait(document.get(str(job_id), (NEW_JOB_REASON, None)), names) for job_id in job_ids}


class _LatestDocument:
    """The latest waits document this process decoded, by its token (none without a token)."""

    def __init__(self) -> None:
        self.kept: tuple[bytes | str, dict[str, Any]] | None = None

    def get(self, version: bytes | str | None) -> dict[str, Any] | None:
        kept = self.kept
        return kept[1] if version is not None and kept is not None and kept[0] == version else None

    def keep(self, version: bytes | str | None, document: dict[str, Any]) -> None:
        self.kept = None if version is None else (version, document)


_documents = _LatestDocument()
