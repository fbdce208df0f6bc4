"""Readers keep the waits document they decoded while its token is unchanged: a page of a few jobs
does not fetch and decode the waits of the whole queue, and never shows a document that was
replaced or deleted since."""

from __future__ import annotations

import json

import pytest
import redis
from django.conf import settings

from scheduling.engine.plan import PendingStatus
from scheduling.live import waits
from scheduling.live.waits import WAITS_KEY, WAITS_VERSION_KEY, job_waits_for, job_waits_store


@pytest.fixture
def client() -> redis.Redis:
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.delete(WAITS_KEY, WAITS_VERSION_KEY)
    return client


def test_a_reader_sees_each_stored_document_and_fetches_an_unchanged_one_once(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_waits_store(statuses=[PendingStatus("1", "quota", 60.0)])
    assert job_waits_for(job_ids=[1])[1].reason == "quota"

    decoded: list[bytes] = []
    real_loads = json.loads
    monkeypatch.setattr(waits.json, "loads", lambda text: decoded.append(text) or real_loads(text))
    assert job_waits_for(job_ids=[1, 2])[1].estimated_start_s == 60.0
    assert decoded == [b"[{},{},{},{}]"]  # the names alone, not the document again

    job_waits_store(statuses=[PendingStatus("1", "capacity", None), PendingStatus("2", "priority", None)])
    read = job_waits_for(job_ids=[1, 2])
    assert (read[1].reason, read[2].reason) == ("capacity", "priority")


def test_a_document_written_or_deleted_without_its_token_is_read_afresh(client: redis.Redis) -> None:
    job_waits_store(statuses=[PendingStatus("1", "quota", None)])
    assert job_waits_for(job_ids=[1])[1].reason == "quota"

    client.delete(WAITS_VERSION_KEY)
    client.set(WAITS_KEY, json.dumps({"1": ["topology", None, None]}))
    assert job_waits_for(job_ids=[1])[1].reason == "topology"
    client.delete(WAITS_KEY)
    assert job_waits_for(job_ids=[1])[1].reason == waits.NEW_JOB_REASON
