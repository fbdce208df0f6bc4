"""The leader stores each tick's waits by what changed: it keeps the document it stored last and
encodes only the entries that moved, yet the stored document is every byte the full document, and
the changes it reports are those a comparison with the whole previous document finds, after random
changes to the queue, and when another writer replaced or deleted the document in between."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
import redis
from django.conf import settings

from scheduling.engine.plan import BlockedStatus, Blocker, PendingStatus
from scheduling.live import waits
from scheduling.live.waits import NAMES_KEY, WAITS_KEY, WAITS_VERSION_KEY, job_waits_for, job_waits_store

REASONS = ("quota", "capacity", "priority", "topology")


@pytest.fixture
def client() -> redis.Redis:
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.delete(WAITS_KEY, NAMES_KEY, WAITS_VERSION_KEY)
    waits._published.kept = None
    return client


def _queue(rng: random.Random, before: dict[str, PendingStatus]) -> dict[str, PendingStatus]:
    """The queue after a tick: some jobs start or leave, some arrive, some change reason or estimate."""
    queue = {job_id: status for job_id, status in before.items() if rng.random() > 0.1}
    for job_id in list(queue):
        roll = rng.random()
        if roll < 0.1:
            queue[job_id] = PendingStatus(job_id, rng.choice(REASONS), rng.choice((None, rng.uniform(0, 9000))))
        elif roll < 0.15:
            queue[job_id] = BlockedStatus(job_id, "capacity", None, waits_for=f"job:{rng.randrange(1, 400)}")
        elif roll < 0.25 and queue[job_id].estimated_start_s is not None:
            # Within the same minute or not: stored either way, reported only across a minute.
            estimate = queue[job_id].estimated_start_s or 0.0
            queue[job_id] = PendingStatus(job_id, queue[job_id].reason, estimate + rng.uniform(0, 90))
    for _ in range(rng.randrange(0, 30)):
        job_id = str(rng.randrange(1, 400))
        queue.setdefault(job_id, PendingStatus(job_id, rng.choice(REASONS), rng.uniform(0, 9000)))
    return queue


def _blockers(rng: random.Random, queue: dict[str, PendingStatus]) -> dict[str, Blocker]:
    shared = [Blocker("quota", "H100", 8, short=rng.randrange(8), team=str(rng.randrange(1, 4))) for _ in range(3)]
    return {job_id: rng.choice(shared) for job_id in queue if rng.random() < 0.7}


def _full(statuses: list[PendingStatus], blockers: dict[str, Blocker], teams: dict[str, str]) -> dict[str, Any]:
    """The document a fresh full build stores, as its readers decode it."""
    facts = waits._facts(blockers)
    return {s.job_id: waits._entry(s, facts.get(s.job_id), teams.get(s.job_id)) for s in statuses}


def _shown(entry: list[Any] | None) -> Any:
    """What a page shows of an entry: estimates to the minute."""
    if entry is None:
        return None
    reason, estimate, *rest = entry
    return (reason, None if estimate is None else estimate // waits.ESTIMATE_GRAIN_S, json.dumps(rest))


@pytest.mark.parametrize("seed", range(4))
def test_the_incremental_document_is_the_full_one_after_random_changes(client: redis.Redis, seed: int) -> None:
    rng = random.Random(seed)
    queue: dict[str, PendingStatus] = {}
    previous: dict[str, Any] = {}
    for tick in range(25):
        queue = _queue(rng, queue)
        statuses = [queue[job_id] for job_id in sorted(queue, key=int)]
        blockers = _blockers(rng, queue)
        teams = {job_id: str(int(job_id) % 5) for job_id in queue}
        if tick % 7 == 3:  # another writer replaced the document, without the leader's token
            client.set(WAITS_KEY, json.dumps({"1": ["topology", None, None]}))
            client.delete(WAITS_VERSION_KEY)
            previous = {"1": ["topology", None, None]}
        elif tick % 7 == 5:  # or deleted it with its token
            client.delete(WAITS_KEY, WAITS_VERSION_KEY)
            previous = {}

        changes = job_waits_store(statuses=statuses, blockers=blockers, team_ids=teams)

        full = _full(statuses, blockers, teams)
        raw = client.get(WAITS_KEY)
        assert raw == json.dumps(full, separators=(",", ":")).encode()
        expected = sorted(int(j) for j, entry in full.items() if _shown(previous.get(j)) != _shown(entry))
        assert [change.job_id for change in changes] == expected
        for change in changes:
            assert change.wait.reason == full[str(change.job_id)][0]
        read = job_waits_for(job_ids=[int(j) for j in full])
        assert {str(job_id): wait.reason for job_id, wait in read.items()} == {j: e[0] for j, e in full.items()}
        previous = full


def test_a_new_process_compares_with_the_stored_document(client: redis.Redis) -> None:
    job_waits_store(statuses=[PendingStatus("1", "quota", 60.0), PendingStatus("2", "capacity", None)])
    waits._published.kept = None  # the next leader keeps nothing yet

    changes = job_waits_store(statuses=[PendingStatus("1", "quota", 90.0), PendingStatus("2", "priority", None)])

    assert [change.job_id for change in changes] == [2]
    assert json.loads(client.get(WAITS_KEY) or b"{}") == {
        "1": ["quota", 90, None, None, None],
        "2": ["priority", None, None, None, None],
    }
