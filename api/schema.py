"""OpenAPI hooks: the schema covers ``/api/v1/`` only, and documents the live websocket's
events (OpenAPI has no notation for a socket, so they sit in an ``x-websocket`` extension, with
their JSON Schemas among the components)."""

from __future__ import annotations

from typing import Any

from portal.socket_events import EVENT_VERSION

_NUMBER = {"type": "number"}
_NULLABLE_NUMBER = {"type": "number", "nullable": True}
_INTEGER = {"type": "integer"}


def _event(kind: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    version = {"type": "integer", "enum": [EVENT_VERSION], "description": "the payload's version"}
    return {
        "type": "object",
        "description": description,
        "required": ["v", "kind", *properties],
        "properties": {"v": version, "kind": {"type": "string", "enum": [kind]}, **properties},
    }


WEBSOCKET_EVENTS: dict[str, dict[str, Any]] = {
    "WsHeartbeatEvent": _event(
        "heartbeat",
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
    "WsFleetEvent": _event(
        "fleet",
        "After each scheduling tick, to every socket: the fleet's share and occupancy.",
        {
            "sim_time_s": _NUMBER,
            "capacity_gpus": _INTEGER,
            "healthy_gpus": _INTEGER,
            "serving_gpus": _INTEGER,
            "training_gpus": _INTEGER,
            "batch_gpus": _INTEGER,
            "utilisation": _NUMBER,
            "pending_jobs": _INTEGER,
            "running_jobs": _INTEGER,
            "node_used": {"type": "object", "additionalProperties": _INTEGER, "description": "node id -> GPUs in use"},
        },
    ),
    "WsJobsEvent": _event(
        "jobs",
        "After a tick that changed jobs: the changes of the teams the socket's user may read "
        "(every team's for fleet admins).",
        {
            "jobs": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["id", "team", "state", "event", "message", "sim_time_s"],
                    "properties": {
                        "id": _INTEGER,
                        "team": {**_INTEGER, "description": "team id"},
                        "state": {"type": "string"},
                        "event": {"type": "string"},
                        "message": {"type": "string"},
                        "sim_time_s": _NUMBER,
                    },
                },
            }
        },
    ),
    "WsIncidentEvent": _event(
        "incident",
        "A node failure opened or advanced (detected, replaced, restored, resumed), to every socket.",
        {
            "id": _INTEGER,
            "node": {"type": "string"},
            "node_id": _INTEGER,
            "incident": {"type": "string", "enum": ["dead", "degraded", "slow"]},
            "failed_at": _NUMBER,
            "detected_at": _NULLABLE_NUMBER,
            "replaced_at": _NULLABLE_NUMBER,
            "restored_at": _NULLABLE_NUMBER,
            "resumed_at": _NULLABLE_NUMBER,
            "lost_gpu_s": _NUMBER,
        },
    ),
    "WsNoticeEvent": _event(
        "notice",
        "A new in-app notice for the socket's user (a quota decision, a quota set by a fleet admin), "
        "with their unread count.",
        {"message": {"type": "string"}, "url": {"type": "string"}, "unread": _INTEGER},
    ),
}

WEBSOCKET = {
    "path": "/ws/fleet/",
    "version": EVENT_VERSION,
    "authentication": "The browser session, or 'Authorization: Bearer <token>' on the opening request.",
    "close_codes": {
        "4401": "not authenticated",
        "4403": "the session or token ended (logged out, revoked)",
        "1013": "try again later (a dependency is unreachable)",
    },
    "events": {name: {"$ref": f"#/components/schemas/{name}"} for name in WEBSOCKET_EVENTS},
    "compatibility": "Every event carries its payload version in 'v' (this 'version'). Within a version, "
    "fields are only added, so readers ignore fields they do not know; a field is removed or changes "
    "meaning only in a new version, announced here.",
}


def only_v1_endpoints(endpoints: list[tuple[str, str, str, Any]]) -> list[tuple[str, str, str, Any]]:
    """Leave out the older ``/api/jobs/`` routes and the schema views themselves."""
    return [
        (path, regex, method, callback)
        for path, regex, method, callback in endpoints
        if path.startswith("/api/v1/") and not path.startswith(("/api/v1/schema", "/api/v1/docs", "/api/v1/redoc"))
    ]


def add_websocket_events(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    result.setdefault("components", {}).setdefault("schemas", {}).update(WEBSOCKET_EVENTS)
    result["x-websocket"] = WEBSOCKET
    return result
