"""Celery tasks: thin interfaces that call one service each."""

from __future__ import annotations

from typing import Any

from celery import Task, shared_task

from scheduling.cycle.leader import cycle_run_as_leader
from scheduling.live.feed import fleet_heartbeat_publish
from scheduling.live.notices import job_notices_email_send
from scheduling.services.workload import demo_load_generate


@shared_task(ignore_result=False)
def fleet_heartbeat() -> dict[str, Any]:
    return fleet_heartbeat_publish()


@shared_task(bind=True, ignore_result=False)
def fleet_cycle(self: Task) -> dict[str, Any] | None:
    result = cycle_run_as_leader(worker=self.request.hostname)
    if result is None:
        return None
    return {"tick": result.tick, "sim_to_s": result.sim_to_s, "changes": len(result.applied.changes)}


@shared_task
def demo_load() -> int:
    return demo_load_generate()


@shared_task
def job_notices_email(*, items: list[list[Any]]) -> int:
    return job_notices_email_send(items=items)
