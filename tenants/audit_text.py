"""An audit entry's before and after as people read them: only what changed, one line per
field, ``Fair-share half-life: 7 days → 5 days``, never the stored dictionaries."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tenants import policy_units


@dataclass(frozen=True, slots=True)
class Change:
    label: str
    before: str | None  # None: the field had no value before (the object was created)
    after: str | None  # None: the field has no value after (the object was removed)


def _label(name: str) -> str:
    described = policy_units.BY_NAME.get(name)
    if described is not None:
        return described.label
    text = name.removesuffix("_s").replace("_", " ")
    return text[:1].upper() + text[1:]


def _text(name: str, value: Any) -> str:
    if value is None and name.endswith("_limit"):
        return "unlimited"  # quota limits: no limit stored as none
    return policy_units.shown_text(name, value)


def audit_changes(*, before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> list[Change]:
    """One `Change` per field whose value differs between ``before`` and ``after``, in the order
    the entry lists them; a created object lists its fields with no before, a removed one with no
    after."""
    old, new = dict(before or {}), dict(after or {})
    names = list(dict.fromkeys([*old, *new]))
    changes = []
    for name in names:
        if before is not None and after is not None and old.get(name) == new.get(name):
            continue
        changes.append(
            Change(
                _label(name),
                _text(name, old.get(name)) if before is not None else None,
                _text(name, new.get(name)) if after is not None else None,
            )
        )
    return changes
