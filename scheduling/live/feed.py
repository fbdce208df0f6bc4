"""Write-side actions for the fleet and its live feed."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import redis
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.utils import timezone

from core.fleet_share import share_summary_text
from core.groups import ALL_JOBS_GROUP, FLEET_GROUP, team_group
from core.live_events import job_change, live_event, wait_change
from core.socket_events import fleet_event_message
from scheduling import engine
from scheduling.engine import Plan
from scheduling.engine.plan import Blocker
from scheduling.fleet_calendar import fleet_clock_text
from scheduling.live.explanations import ahead_is_private, wait_names_for, wait_text
from scheduling.live.waits import JobWait, WaitChange, job_waits_store
from scheduling.models import Incident
from scheduling.selectors import FleetSummary, fleet_summary

if TYPE_CHECKING:
    from scheduling.tick_outcome import AppliedTick, TickSample

HEARTBEAT_SEQUENCE_KEY = "fleetline:heartbeat:seq"
PUBLISH_CONCURRENCY = 8
# A web process's heartbeat tells the fleet's size as read at most this long ago.
HEARTBEAT_SUMMARY_MAX_AGE_S = 5.0


def fleet_events_publish(events: list[tuple[str, dict[str, Any]]]) -> None:
    """Send each ``(group, payload)`` to every websocket in its group, all in one pass of the
    event loop. Call it outside open transactions."""
    layer = get_channel_layer()
    if layer is None or not events:
        return

    async def send_all() -> None:
        # A few at a time: the channel layer's connection pool is small.
        for start in range(0, len(events), PUBLISH_CONCURRENCY):
            await asyncio.gather(
                *(
                    layer.group_send(group, fleet_event_message(payload))
                    for group, payload in events[start : start + PUBLISH_CONCURRENCY]
                )
            )

    async_to_sync(send_all)()


def fleet_event_publish(*, group: str, payload: dict[str, Any]) -> None:
    fleet_events_publish([(group, payload)])


def fleet_heartbeat_publish() -> dict[str, Any]:
    """Publish the fleet's heartbeat (a sequence number and its size) to the fleet group."""
    seq = int(redis.Redis.from_url(settings.REDIS_URL).incr(HEARTBEAT_SEQUENCE_KEY))
    payload = live_event(
        "heartbeat", seq=seq, sent_at=timezone.now().isoformat(), **dataclasses.asdict(fleet_summary())
    )
    fleet_event_publish(group=FLEET_GROUP, payload=payload)
    return payload


class _KeptSummary:
    """The fleet's size as this process read it last, and when (monotonic seconds)."""

    def __init__(self) -> None:
        self.summary: FleetSummary | None = None
        self.read_at = 0.0

    async def get(self) -> FleetSummary:
        if self.summary is None or time.monotonic() - self.read_at >= HEARTBEAT_SUMMARY_MAX_AGE_S:
            self.summary = await database_sync_to_async(fleet_summary)()
            self.read_at = time.monotonic()
        return self.summary


_kept_summary = _KeptSummary()


async def fleet_heartbeat_message() -> dict[str, Any]:
    """The heartbeat a web process hands its own sockets each second (`FleetChannelLayer.beat_set`),
    made and encoded once for all of them, whatever the ticks and the Celery queues are doing. Its
    sequence number is the second of the clock it is sent in: every process numbers a second
    alike, and a socket sees one number a second."""
    now = timezone.now()
    summary = await _kept_summary.get()
    payload = live_event("heartbeat", seq=int(now.timestamp()), sent_at=now.isoformat(), **dataclasses.asdict(summary))
    return fleet_event_message(payload)


def tick_publish(*, sample: TickSample, applied: AppliedTick, plan: Plan, jobs: Sequence[engine.Job]) -> None:
    """After a tick commits: the pending jobs' reasons and blockers stored, the fleet's share and
    occupancy to everyone, and the tick's job changes and changed waits batched per team (admins
    get every team's batch): one event of each kind per team at most, however many jobs changed."""
    waits = waits_publish_events(plan=plan, jobs=jobs)
    by_team: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for change in applied.changes:
        by_team[change.team_id].append(
            job_change(
                id=change.job_id,
                team=change.team_id,
                state=change.state,
                event=change.event,
                message=change.message,
                sim_time_s=sample.sim_time_s,
            )
        )
    events: list[tuple[str, dict[str, Any]]] = [(FLEET_GROUP, fleet_payload(sample))]
    events += [(team_group(team_id), live_event("jobs", jobs=jobs)) for team_id, jobs in sorted(by_team.items())]
    if by_team:
        everything = [job for _, changes in sorted(by_team.items()) for job in changes]
        events.append((ALL_JOBS_GROUP, live_event("jobs", jobs=everything)))
    fleet_events_publish(events + waits)


def waits_publish_events(*, plan: Plan, jobs: Sequence[engine.Job]) -> list[tuple[str, dict[str, Any]]]:
    """Store the plan's waits with each explained job's blocker and the names they name; the
    ``waits`` events of what changed since the stored ones, one per team with changes and one
    with all of them for fleet admins."""
    team_ids = {job.id: str(job.team) for job in jobs}
    blockers = plan.blockers(jobs)
    names = wait_names_for(statuses=plan.pending, blockers=blockers)
    by_team: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for change in job_waits_store(statuses=plan.pending, blockers=blockers, names=names, team_ids=team_ids):
        team_id = team_ids.get(str(change.job_id))
        if team_id is not None:
            team = int(team_id)
            by_team[team].append(_wait_payload(change, team))
    events = [(team_group(team), live_event("waits", jobs=changes)) for team, changes in sorted(by_team.items())]
    if by_team:
        everything = [change for _, changes in sorted(by_team.items()) for change in changes]
        events.append((ALL_JOBS_GROUP, live_event("waits", jobs=everything)))
    return events


def _wait_payload(change: WaitChange, team: int) -> dict[str, Any]:
    wait, blocker = change.wait, change.wait.blocker
    return wait_change(
        id=change.job_id,
        team=team,
        reason=wait.reason,
        text=wait_text(wait),
        estimated_start_s=wait.estimated_start_s,
        waits_for=wait.waits_for,
        blocker=None if blocker is None else _blocker_payload(blocker, wait),
    )


def _blocker_payload(blocker: Blocker, wait: JobWait) -> dict[str, Any]:
    def number(engine_id: str | None) -> int | None:
        return int(engine_id) if engine_id is not None and engine_id.isdigit() else None

    return {
        "kind": blocker.kind,
        "accelerator": blocker.accelerator,
        "gpus": blocker.gpus,
        "short": blocker.short,
        "have": blocker.have,
        "limit": blocker.limit,
        "team": number(blocker.team),
        "job": None
        if blocker.job_id is not None and ahead_is_private(blocker.job_id, wait)
        else number(blocker.job_id),
        "level": blocker.level,
        "domain": blocker.domain,
    }


def incidents_publish(*, incident_ids: Iterable[int]) -> None:
    """Each new or advanced incident to everyone watching the fleet (after commit)."""
    incidents = Incident.objects.filter(pk__in=list(incident_ids)).select_related("node").order_by("pk")
    fleet_events_publish([(FLEET_GROUP, incident_payload(incident)) for incident in incidents])


def incident_payload(incident: Incident) -> dict[str, Any]:
    return live_event(
        "incident",
        id=incident.pk,
        node=incident.node.name,
        node_id=incident.node_id,
        node_state=incident.node.state,
        incident=incident.kind,
        failed_at=incident.failed_at,
        detected_at=incident.detected_at,
        replaced_at=incident.replaced_at,
        restored_at=incident.restored_at,
        resumed_at=incident.resumed_at,
        lost_gpu_s=incident.lost_gpu_s,
    )


def fleet_payload(sample: TickSample) -> dict[str, Any]:
    share = sample.share
    return live_event(
        "fleet",
        sim_time_s=sample.sim_time_s,
        fleet_time=fleet_clock_text(sample.sim_time_s),
        capacity_gpus=sample.capacity_gpus,
        healthy_gpus=sample.healthy_gpus,
        serving_gpus=sample.serving_gpus,
        training_gpus=sample.training_gpus,
        batch_gpus=sample.batch_gpus,
        idle_gpus=share.idle_gpus,
        utilisation=round(share.utilisation, 4),
        summary=share_summary_text([share]),
        pending_jobs=sample.pending_jobs,
        running_jobs=sample.running_jobs,
        node_used=sample.node_used,
    )
