"""OpenAPI hooks: the schema covers ``/api/v1/`` only, and documents the live websocket's
events (OpenAPI has no notation for a socket, so they sit in an ``x-websocket`` extension, with
their JSON Schemas among the components)."""

from __future__ import annotations

import re
from typing import Any

from drf_standardized_errors.openapi import AutoSchema
from rest_framework.permissions import AllowAny

from core.live_events import EVENTS
from core.socket_events import EVENT_VERSION


def _event(kind: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    version = {"type": "integer", "enum": [EVENT_VERSION], "description": "the payload's version"}
    return {
        "type": "object",
        "description": description,
        "required": ["v", "kind", *properties],
        "properties": {"v": version, "kind": {"type": "string", "enum": [kind]}, **properties},
    }


# The events as ``core.live_events`` defines them (the one definition publishers build from).
WEBSOCKET_EVENTS: dict[str, dict[str, Any]] = {
    f"Ws{kind.capitalize()}Event": _event(kind, description, fields) for kind, (description, fields) in EVENTS.items()
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
    """Leave out the retired ``/api/jobs/`` routes and the schema views themselves."""
    return [
        (path, regex, method, callback)
        for path, regex, method, callback in endpoints
        if path.startswith("/api/v1/") and not path.startswith(("/api/v1/schema", "/api/v1/docs", "/api/v1/redoc"))
    ]


def add_websocket_events(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    result.setdefault("components", {}).setdefault("schemas", {}).update(WEBSOCKET_EVENTS)
    result["x-websocket"] = WEBSOCKET
    return result


# A resource's own path under a create's path, and perhaps one of its actions: "{id}/",
# "{id}/cancel/", "{username}/".
_MADE_THERE = re.compile(r"\{(?P<key>\w+)\}/(?:[\w-]+/)?")
_METHODS = ("get", "put", "patch", "post", "delete")


def add_links(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """OpenAPI links from each create to what it made: the 201's ``id`` (or ``name``,
    ``username``) opens the resource and each of its actions, for example ``POST /jobs/`` to
    ``GET /jobs/{id}/`` and ``POST /jobs/{id}/cancel/``; the create's own path parameters carry
    over. Clients read them, and schemathesis's stateful phase chains calls along them."""
    paths = result.get("paths", {})
    for path, operations in paths.items():
        created = operations.get("post", {}).get("responses", {}).get("201")
        if created is None:
            continue
        outer = re.findall(r"\{(\w+)\}", path)
        links: dict[str, Any] = {}
        for other, other_operations in paths.items():
            made = _MADE_THERE.fullmatch(other[len(path) :]) if other.startswith(path) else None
            if made is None:
                continue
            parameters = {name: f"$request.path.{name}" for name in outer}
            parameters[made["key"]] = f"$response.body#/{made['key']}"
            for method in _METHODS:
                if method in other_operations:
                    operation_id = other_operations[method]["operationId"]
                    links[operation_id] = {"operationId": operation_id, "parameters": parameters}
        if links:
            created["links"] = links
    return result


class ApiAutoSchema(AutoSchema):
    """drf-standardized-errors' schema, with a 403 on every operation that needs a signed-in user.
    The library documents a 403 only for a permission class beyond ``IsAuthenticated``; these
    views refuse an operation to the wrong role (a lead cordoning a node, a member changing the
    policy) in the service they call, where no permission class shows it."""

    def _should_add_http403_error_response(self) -> bool:
        permissions = self.view.get_permissions()
        return bool(permissions) and not all(isinstance(permission, AllowAny) for permission in permissions)
