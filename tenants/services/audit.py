from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import models

from tenants.models import AuditEvent, Team


def snapshot_fields(instance: models.Model, fields: list[str]) -> dict[str, Any]:
    """A JSON-safe picture of some fields, for an audit entry's before/after."""
    picture: dict[str, Any] = {}
    for name in fields:
        field = instance._meta.get_field(name)
        if not isinstance(field, models.Field):
            raise ValueError(f"{type(instance).__name__}.{name} is a relation seen from the other side, not a field")
        value = getattr(instance, field.attname)
        picture[name] = value if value is None or isinstance(value, (bool, int, float, str)) else str(value)
    return picture


def audit_record(
    *,
    actor: User | None,
    kind: str,
    object_repr: str,
    team: Team | None = None,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    source: str = "",
) -> AuditEvent:
    """Append one entry to the audit log, inside the caller's transaction. ``source`` names what
    made a change that no person made ("single sign-on"); blank for the scheduler."""
    return AuditEvent.objects.create(
        actor=actor,
        kind=kind,
        team=team,
        object_repr=object_repr[:200],
        before=before,
        after=after,
        source=source,
    )


def login_lockout_record(*, username: str, ip_address: str, failures: int) -> AuditEvent:
    """Audit a login locked out after ``failures`` wrong passwords for ``username`` from
    ``ip_address``. No actor: whoever typed them is unknown, and may not be the account's owner."""
    return audit_record(
        actor=None,
        kind=AuditEvent.Kind.LOGIN_LOCKED_OUT,
        object_repr=f"Login of {username} from {ip_address}",
        after={"username": username, "ip_address": ip_address, "failures": failures},
    )
