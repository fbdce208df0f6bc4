"""Rows of the database in, frozen engine dataclasses out. Ids cross as strings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduling import engine
from scheduling.engine import policy_settings
from scheduling.models import Node

UNLIMITED = 10**9


def node_from_row(row: Any) -> engine.Node:
    return engine.Node(
        id=str(row.id),
        pod=row.rack__pod__name,
        rack=row.rack__name,
        accelerator=row.accelerator_type__name,
        gpus=row.gpus,
        healthy_gpus=row.healthy_gpus,
        cordoned=row.state != Node.State.UP,
    )


NODE_FIELDS = ("id", "rack__name", "rack__pod__name", "accelerator_type__name", "gpus", "healthy_gpus", "state")

JOB_FIELDS = (
    "id",
    "team_id",
    "kind",
    "priority_class__value",
    "priority_class__preemptible",
    "priority_class__may_preempt",
    "accelerator_type__name",
    "gpus",
    "min_gpus",
    "max_gpus",
    "duration_s",
    "time_limit_s",
    "submit_s",
    "checkpoint_interval_s",
    "checkpoint_gb",
    "checkpoint_on_preempt",
    "required_level",
    "preferred_level",
    "attained_gpu_s",
    "requeued_by_failure",
    "state",
    "version",
    "started_s",
    "anchor_s",
    "anchor_progress_s",
    "base_progress_s",
    "saved_progress_s",
    "borrowing",
    "placement_level",
    "grace_until_s",
    "restarts",
)


class JobCache:
    """Engine jobs built in earlier ticks, reused while the row they came from is unchanged.

    Building a frozen ``engine.Job`` costs tens of microseconds, and a fleet has tens of
    thousands of queued jobs that do not change from one tick to the next. The key holds
    everything that can change a job's engine form: its version (bumped on every write) and its
    priority class's current value, preemptibility and right to preempt (admins may edit the class).
    """

    def __init__(self) -> None:
        self._jobs: dict[tuple[Any, ...], engine.Job] = {}

    def jobs_from_rows(self, rows: list[Any]) -> list[engine.Job]:
        fresh: dict[tuple[Any, ...], engine.Job] = {}
        for row in rows:
            key = (
                row.id,
                row.version,
                row.priority_class__value,
                row.priority_class__preemptible,
                row.priority_class__may_preempt,
            )
            fresh[key] = self._jobs.get(key) or job_from_row(row)
        self._jobs = fresh  # only this tick's jobs are kept, so the cache never outgrows the queue
        return list(fresh.values())


def job_from_row(row: Any) -> engine.Job:
    return engine.Job(
        id=str(row.id),
        team=str(row.team_id),
        kind=row.kind,
        priority=row.priority_class__value,
        preemptible=row.priority_class__preemptible,
        accelerator=row.accelerator_type__name,
        gpus=row.gpus,
        duration_s=row.duration_s,
        submit_s=row.submit_s,
        time_limit_s=row.time_limit_s,
        min_gpus=row.min_gpus,
        max_gpus=row.max_gpus,
        checkpoint_interval_s=row.checkpoint_interval_s,
        checkpoint_gb=row.checkpoint_gb,
        checkpoint_on_preempt=row.checkpoint_on_preempt,
        may_preempt=row.priority_class__may_preempt,
        required_level=row.required_level or None,
        preferred_level=row.preferred_level or None,
        attained_gpu_s=row.attained_gpu_s,
        requeued_by_failure=row.requeued_by_failure,
    )


def team_from_row(row: Mapping[str, Any]) -> engine.Team:
    return engine.Team(
        id=str(row["id"]), department=str(row["department_id"]), fairshare_weight=row["fairshare_weight"]
    )


def quota_from_row(row: Mapping[str, Any]) -> engine.Quota:
    return engine.Quota(
        team=str(row["team_id"]),
        accelerator=row["accelerator_type__name"],
        guaranteed=row["guaranteed"],
        borrow_limit=UNLIMITED if row["borrow_limit"] is None else row["borrow_limit"],
        lend_limit=row["lend_limit"],
    )


# The stored policy's settings, from their declarations (`scheduling.engine.policy_settings`).
# FleetPolicy field -> the engine Policy field it sets: every knob an admin may set.
POLICY_FIELDS: dict[str, str] = {
    knob.name: knob.key for knob in policy_settings.STORED if knob.engine is not None and knob.level is None
}
# FleetPolicy field -> the level of `Policy.level_penalty` it sets.
PENALTY_FIELDS: dict[str, str] = {knob.name: knob.level for knob in policy_settings.STORED if knob.level is not None}
# Engine knobs admins cannot set, with what they do: every cycle runs with the engine's defaults
# (the policy page lists them).
ENGINE_ONLY_FIELDS: dict[str, str] = {knob.key: knob.help for knob in policy_settings.ENGINE_ONLY}
# FleetPolicy fields the engine does not read: quota approval, failure detection, reports.
PORTAL_ONLY_FIELDS = (
    "id",
    *(knob.name for knob in policy_settings.STORED if knob.engine is None),
    "updated_at",
)


def policy_from_row(row: Any | None) -> engine.Policy:
    """The engine policy from the admin's FleetPolicy row (engine defaults when there is none)."""
    if row is None:
        return engine.Policy()
    return policy_settings.policy_from({knob.name: getattr(row, knob.name) for knob in policy_settings.STORED})
