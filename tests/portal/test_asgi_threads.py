"""The ASGI handler lends each request a thread of its own for the whole request (its signals,
middleware, view and close), keeps those threads for later requests instead of starting one per
request, and runs requests that overlap in different threads."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.signals import request_finished, request_started

from portal.asgi import django_asgi_app

pytestmark = pytest.mark.django_db(transaction=True)


async def _get(path: str) -> int:
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": b"", "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80), "headers": [(b"host", b"testserver")],
    }  # fmt: skip
    sent: list[dict[str, Any]] = []
    messages = [{"type": "http.request", "body": b"", "more_body": False}]

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop(0)
        await asyncio.Event().wait()
        raise AssertionError

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await django_asgi_app(scope, receive, send)
    return int(sent[0]["status"])


@pytest.fixture
def threads_seen() -> Iterator[list[tuple[str, int]]]:
    """Which thread sent each request's ``request_started`` and ``request_finished``."""
    seen: list[tuple[str, int]] = []

    def started(**_: Any) -> None:
        seen.append(("started", threading.get_ident()))

    def finished(**_: Any) -> None:
        seen.append(("finished", threading.get_ident()))

    request_started.connect(started)
    request_finished.connect(finished)
    yield seen
    request_started.disconnect(started)
    request_finished.disconnect(finished)


def test_requests_one_after_another_start_no_thread_and_each_runs_in_one(
    threads_seen: list[tuple[str, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def one_after_another() -> list[int]:
        await _get("/login/")  # the first request may start the thread it runs in
        started = threading.Thread.start
        counted: list[threading.Thread] = []

        def start(thread: threading.Thread) -> None:
            counted.append(thread)
            started(thread)

        monkeypatch.setattr(threading.Thread, "start", start)
        statuses = [await _get("/login/") for _ in range(10)]
        assert counted == []
        return statuses

    assert asyncio.run(one_after_another()) == [200] * 10
    main = threading.get_ident()
    pairs = list(zip(threads_seen[::2], threads_seen[1::2], strict=True))
    assert len(pairs) == 11
    for (started, thread), (finished, same) in pairs:
        assert (started, finished) == ("started", "finished") and thread == same != main


def test_requests_that_overlap_run_in_threads_of_their_own(threads_seen: list[tuple[str, int]]) -> None:
    async def together() -> list[int]:
        return list(await asyncio.gather(*(_get("/login/") for _ in range(4))))

    assert asyncio.run(together()) == [200] * 4
    started = [ident for event, ident in threads_seen if event == "started"]
    assert len(set(started)) == 4
    assert sorted(ident for event, ident in threads_seen if event == "finished") == sorted(started)
