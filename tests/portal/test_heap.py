"""The web process's heap: start-up objects frozen out of the collector's sight, a larger young
generation (portal/heap.py), and one counting cursor class per process (portal/db_backends)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import DEFAULT_DB_ALIAS, connections
from prometheus_client import REGISTRY

from portal.heap import THRESHOLDS

ROOT = Path(__file__).resolve().parents[2]


def test_the_asgi_application_freezes_start_up_and_sets_the_thresholds() -> None:
    probe = "import gc, json, portal.asgi; print(json.dumps([gc.get_threshold(), gc.get_freeze_count()]))"
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=True
    )
    thresholds, frozen = json.loads(result.stdout.strip().splitlines()[-1])
    assert tuple(thresholds) == THRESHOLDS
    assert frozen > 50_000  # Django, DRF, the project and every view, imported before the first request


@pytest.mark.django_db(transaction=True)
def test_every_connection_counts_its_queries_through_one_cursor_class() -> None:
    def executed() -> float:
        return sum(
            sample.value
            for metric in REGISTRY.collect()
            if metric.name == "django_db_execute"
            for sample in metric.samples
            if sample.name == "django_db_execute_total"
        )

    backends = [connections.create_connection(DEFAULT_DB_ALIAS) for _ in range(2)]
    try:
        cursors = [backend.cursor() for backend in backends]
        before = executed()
        cursors[0].execute("SELECT 1")
        assert type(cursors[0].cursor) is type(cursors[1].cursor)
        assert executed() == before + 1
    finally:
        for backend in backends:
            backend.close()
