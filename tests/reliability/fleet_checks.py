"""What must hold in the fleet's database after any fault, read in one consistent snapshot
(REPEATABLE READ) so that a tick committing meanwhile cannot make a false alarm. Each check is a
query returning the rows that break it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg

LEGAL_STATES = ("pending", "running", "completed", "cancelled", "timed_out")

CHECKS: dict[str, str] = {
    # No GPU double-booked: each node's counter is the sum of its allocations, within its healthy GPUs.
    "node counter differs from its allocations or exceeds its healthy GPUs": """
        SELECT n.name, n.allocated_gpus, n.healthy_gpus, COALESCE(SUM(a.gpus), 0)
        FROM scheduling_node n LEFT JOIN scheduling_allocation a ON a.node_id = n.id
        GROUP BY n.id
        HAVING COALESCE(SUM(a.gpus), 0) <> n.allocated_gpus OR n.allocated_gpus > n.healthy_gpus""",
    # Gangs are all or nothing: a running job holds its size (within its bounds when elastic).
    "running gang not whole": """
        SELECT j.id, j.gpus, COALESCE(SUM(a.gpus), 0)
        FROM scheduling_job j LEFT JOIN scheduling_allocation a ON a.job_id = j.id
        WHERE j.state = 'running'
        GROUP BY j.id
        HAVING COALESCE(SUM(a.gpus), 0) < COALESCE(j.min_gpus, j.gpus)
            OR COALESCE(SUM(a.gpus), 0) > COALESCE(j.max_gpus, j.gpus)""",
    "allocation of a job that is not running": """
        SELECT a.id, j.id, j.state
        FROM scheduling_allocation a JOIN scheduling_job j ON j.id = a.job_id
        WHERE j.state <> 'running'""",
    "job in an illegal state": f"""
        SELECT id, state, started_s, finished_s FROM scheduling_job
        WHERE state NOT IN ({", ".join(f"'{state}'" for state in LEGAL_STATES)})
           OR (state = 'running' AND started_s IS NULL)
           OR (state IN ('completed', 'timed_out') AND finished_s IS NULL)""",
}


def fleet_violations(
    connection: psycopg.Connection[Any],
    *,
    submitter_id: int,
    acknowledged: dict[str, int],
    tried: Callable[[], set[str]],
) -> list[str]:
    """Every broken rule, as one line each: empty when the fleet is sound.

    ``acknowledged`` maps each Idempotency-Key the API answered, up to just before the snapshot, to
    the job id it answered with: each of those jobs must be there. ``tried`` gives every key the
    client sent, read just after the snapshot: each job of the client's must have come from one
    (a submission still being retried may or may not have made its job yet)."""
    problems: list[str] = []
    with connection.transaction():
        connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        for rule, query in CHECKS.items():
            for row in connection.execute(query).fetchall()[:10]:
                problems.append(f"{rule}: {row}")
        jobs = dict(
            connection.execute(
                "SELECT idempotency_key, id FROM scheduling_job WHERE submitted_by_id = %s", [submitter_id]
            ).fetchall()
        )
    for key, job_id in acknowledged.items():
        if jobs.get(key) != job_id:
            problems.append(f"job lost: key {key} was answered with job {job_id}, the database has {jobs.get(key)}")
    known = tried()
    for key, job_id in jobs.items():
        if key not in known:
            problems.append(f"job {job_id} under key {key!r} was never submitted by the client")
    return problems
