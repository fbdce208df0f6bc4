"""The events the live websocket (``/ws/fleet/``) carries to pages and API clients, defined once.

Each kind's fields are listed here with their JSON Schema. Publishers build payloads with
`live_event` (and a tick's job changes with `job_change`), which refuse a field the definition
lacks and one it requires but is missing; the API schema documents these same definitions
(``api.schema``), and a test reads the page scripts' handlers and checks they read only fields
defined here. ``core.socket_events.fleet_event_message`` stamps each with its version (``v``).
"""

from __future__ import annotations

from typing import Any

_NUMBER = {"type": "number"}
_NULLABLE_NUMBER = {"type": "number", "nullable": True}
_INTEGER = {"type": "integer"}
_STRING = {"type": "string"}

JOB_CHANGE_FIELDS: dict[str, dict[str, Any]] = {
    "id": _INTEGER,
    "team": {**_INTEGER, "description": "team id"},
    "state": _STRING,
    "event": _STRING,
    "message": _STRING,
    "sim_time_s": _NUMBER,
}

_NULLABLE_STRING = {"type": "string", "nullable": True}
_NULLABLE_INTEGER = {"type": "integer", "nullable": True}
BLOCKER_FIELDS: dict[str, dict[str, Any]] = {
    "kind": {**_STRING, "description": "which limit or what it waits for (team-limit, quota-held, borrowing, ...)"},
    "accelerator": _STRING,
    "gpus": {**_INTEGER, "description": "the size it waits to start at"},
    "short": {**_INTEGER, "description": "GPUs short"},
    "have": {**_INTEGER, "description": "what there is, by kind: in use, free, lent"},
    "limit": {**_NULLABLE_INTEGER, "description": "the limit in question, by kind"},
    "team": {**_NULLABLE_INTEGER, "description": "the team whose limit or guarantee holds it"},
    "job": {**_NULLABLE_INTEGER, "description": "the job ahead of it"},
    "level": {**_NULLABLE_STRING, "description": "node, rack, pod or fleet"},
    "domain": {**_NULLABLE_STRING, "description": "the node (id), rack (pod/rack) or pod it waits for"},
}
WAIT_CHANGE_FIELDS: dict[str, dict[str, Any]] = {
    "id": _INTEGER,
    "team": {**_INTEGER, "description": "team id"},
    "reason": {**_STRING, "description": "the engine's reason code"},
    "text": {**_STRING, "description": "why it waits, in words, naming what holds it"},
    "estimated_start_s": _NULLABLE_NUMBER,
    "waits_for": {**_NULLABLE_STRING, "description": "what it waits for when no estimate is believable"},
    "blocker": {
        "type": "object",
        "nullable": True,
        "properties": BLOCKER_FIELDS,
        "description": "the one thing that holds it, as facts",
    },
}

# kind -> (what it is and who gets it, its fields)
EVENTS: dict[str, tuple[str, dict[str, dict[str, Any]]]] = {
    "heartbeat": (
        "Every second to every socket: a sequence number and the fleet's size.",
        {
            "seq": _INTEGER,
            "sent_at": {"type": "string", "format": "date-time"},
            "pods": _INTEGER,
            "racks": _INTEGER,
            "nodes": _INTEGER,
            "gpus": _INTEGER,
            "healthy_gpus": _INTEGER,
            "nodes_up": _INTEGER,
        },
    ),
    "fleet": (
        "After each scheduling tick, to every socket: the fleet's share and occupancy.",
        {
            "sim_time_s": _NUMBER,
            "fleet_time": {**_STRING, "description": "sim_time_s on the fleet calendar, as pages show it"},
            "capacity_gpus": _INTEGER,
            "healthy_gpus": _INTEGER,
            "serving_gpus": _INTEGER,
            "training_gpus": _INTEGER,
            "batch_gpus": _INTEGER,
            "idle_gpus": {**_INTEGER, "description": "healthy GPUs nobody holds"},
            "utilisation": {**_NUMBER, "description": "GPUs held / capacity_gpus (every installed GPU)"},
            "summary": {**_STRING, "description": "the share in one sentence, for people"},
            "pending_jobs": _INTEGER,
            "running_jobs": _INTEGER,
            "node_used": {"type": "object", "additionalProperties": _INTEGER, "description": "node id -> GPUs in use"},
        },
    ),
    "jobs": (
        "After a tick that changed jobs: the changes of the teams the socket's user may read "
        "(every team's for fleet admins).",
        {
            "jobs": {
                "type": "array",
                "items": {"type": "object", "required": list(JOB_CHANGE_FIELDS), "properties": JOB_CHANGE_FIELDS},
            }
        },
    ),
    "waits": (
        "After a tick that changed why jobs wait or when they should start (the estimate to the minute): "
        "those jobs of the teams the socket's user may read, one event per team and tick.",
        {
            "jobs": {
                "type": "array",
                "items": {"type": "object", "required": list(WAIT_CHANGE_FIELDS), "properties": WAIT_CHANGE_FIELDS},
            }
        },
    ),
    "incident": (
        "A node failure opened or advanced (detected, replaced, restored, resumed), to every socket.",
        {
            "id": _INTEGER,
            "node": _STRING,
            "node_id": _INTEGER,
            "node_state": {
                "type": "string",
                "enum": ["up", "cordoned", "down"],
                "description": "the node's state as the incident leaves it",
            },
            "incident": {"type": "string", "enum": ["dead", "degraded", "slow"]},
            "failed_at": _NUMBER,
            "detected_at": _NULLABLE_NUMBER,
            "replaced_at": _NULLABLE_NUMBER,
            "restored_at": _NULLABLE_NUMBER,
            "resumed_at": _NULLABLE_NUMBER,
            "lost_gpu_s": _NUMBER,
        },
    ),
    "notice": (
        "A new in-app notice for the socket's user (a quota decision, a quota set by a fleet admin), "
        "with their unread count.",
        {"message": _STRING, "url": _STRING, "unread": _INTEGER},
    ),
}
# Pages see a tick's job changes one at a time, as events of this kind (``static/portal/live.js``).
PAGE_JOB_KIND = "job"


def _checked(what: str, fields: dict[str, Any], defined: dict[str, Any]) -> None:
    if fields.keys() != defined.keys():
        extra, missing = sorted(fields.keys() - defined.keys()), sorted(defined.keys() - fields.keys())
        raise ValueError(f"{what}: fields not defined {extra}, defined fields missing {missing}")


def live_event(kind: str, **fields: Any) -> dict[str, Any]:
    """The payload of a `kind` event with exactly its defined fields (a ValueError otherwise)."""
    if kind not in EVENTS:
        raise ValueError(f"no live event of kind {kind!r}")
    _checked(f"{kind} event", fields, EVENTS[kind][1])
    return {"kind": kind, **fields}


def wait_change(**fields: Any) -> dict[str, Any]:
    """One job's changed wait in a ``waits`` event, with exactly its defined fields."""
    _checked("wait change", fields, WAIT_CHANGE_FIELDS)
    return fields


def job_change(**fields: Any) -> dict[str, Any]:
    """One job's change in a ``jobs`` event, with exactly its defined fields."""
    _checked("job change", fields, JOB_CHANGE_FIELDS)
    return fields
