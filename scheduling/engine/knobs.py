"""How a policy setting is declared: once, where the engine reads it.

Each setting of the engine's `Policy` is a dataclass field declared with `knob(...)`: its default
and, in the field's metadata, a `Knob` with what people need to set it (label, help, the unit it
is shown in, its bounds in stored units, whether admins store it, whether a what-if replay may
change it). `scheduling.engine.policy_settings` collects them, with the fleet settings the engine
does not read, and every surface (the stored policy, the policy form, the API, the what-if
settings, the simulator's tweaks, the conversion of a stored row) is built from that one list.

Plain Python: the engine stays free of Django.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

KNOB = "knob"  # the metadata key of a field declared with `knob`
PARTS = "knob_parts"  # the metadata key of a field stored as several knobs (`level_penalty`)


@dataclass(frozen=True, slots=True)
class Unit:
    """How a stored value (seconds, ratios) is shown and entered: ``shown = (stored - offset) / factor``."""

    suffix: str  # appended to the form field's name and to labels: "days"
    factor: float = 1.0
    offset: float = 0.0
    symbol: str = ""  # after a shown value: "%", " h"
    singular: str = ""  # after a shown value of exactly 1, when it differs: " day"

    def to_shown(self, stored: float | None) -> float | None:
        if stored is None:
            return None
        shown = (stored - self.offset) / self.factor
        return round(shown, 6)

    def to_stored(self, shown: float | None) -> float | None:
        # Rounded so that "15 %" stores 1.15, not 1.1500000000000001.
        return None if shown is None else round(shown * self.factor + self.offset, 9)


SECONDS = Unit("seconds", symbol=" s")
MINUTES = Unit("minutes", 60.0, symbol=" min")
HOURS = Unit("hours", 3600.0, symbol=" h")
DAYS = Unit("days", 86400.0, symbol=" days", singular=" day")
# 1.15 stored (a speed divisor) is "15 % slower"; 1.3 (a step-time ratio) is "30 % over".
PERCENT_OVER_ONE = Unit("percent", 0.01, 1.0, symbol=" %")
PERCENT = Unit("percent", 0.01, symbol=" %")
COUNT = Unit("", symbol="")

HOUR_S = 3600.0
DAY_S = 86400.0
# Waits and bounds on waits: a month of fleet time is longer than any job should wait for anything.
MAX_WAIT_S = 30 * DAY_S

# Who may change a knob: (admins store it, a what-if replay may change it). The simulator's tweaks
# may change every engine knob.
ADMIN = "admin"  # the fleet policy's admins (and so every what-if replay)
ENGINE = "engine"  # every cycle runs the engine's default; a what-if replay may try another
INTERNAL = "internal"  # how the engine bounds its own work: the simulator's tweaks only
SCOPES: dict[str, tuple[bool, bool]] = {ADMIN: (True, True), ENGINE: (False, True), INTERNAL: (False, False)}

KINDS: dict[str, type] = {"bool": bool, "int": int, "float": float, "str": str}


@dataclass(frozen=True, slots=True)
class Knob:
    """One policy setting, as declared.

    ``name`` is the setting's one public name: the stored policy's column, the API's field, the
    audit log's key and the base of the policy form's field. ``engine`` is the `Policy` field it
    sets (None: a fleet setting the engine does not read), ``level`` the level of
    `Policy.level_penalty` for a topology penalty. ``stored``: admins set it (a column, a form
    field, an API field); otherwise every cycle runs the engine's default. ``replay``: a what-if
    replay may change it (the simulator's tweaks may change every engine knob)."""

    name: str
    kind: type  # bool, int, float or str
    default: Any
    label: str
    help: str
    unit: Unit | None = None  # None: not a number (a switch or a choice)
    # In stored units (seconds, ratios), both ends included; every number has both.
    minimum: float | None = None
    maximum: float | None = None
    nullable: bool = False  # None is a value ("no bound"), entered as an empty field
    choices: tuple[tuple[str, str], ...] = ()  # (value, label) of a choice
    engine: str | None = None
    level: str | None = None
    stored: bool = True
    replay: bool = True

    @property
    def key(self) -> str:
        """The name the engine's side knows it by: the `Policy` field, or the knob's own name
        for a part of one (a topology penalty) and for a fleet setting. What-if settings and the
        simulator's tweaks are keyed by it."""
        return self.engine if self.engine is not None and self.level is None else self.name

    def problem(self, value: object) -> str | None:
        """Why ``value`` cannot be this setting's, in a few words ("is above 600"), or None."""
        if value is None:
            return None if self.nullable else "is empty"
        if self.kind is bool:
            return None if isinstance(value, bool) else "is not on or off"
        if self.kind is str:
            return None if value in {choice for choice, _ in self.choices} else "is not one of the choices"
        if isinstance(value, bool) or not isinstance(value, int | float):
            return "is not a number"
        if not _finite(value):
            return "is not finite"
        if self.kind is int and value != int(value):
            return "is not a whole number"
        assert self.minimum is not None and self.maximum is not None, self.name
        if value < self.minimum:
            return f"is below {_plain(self.minimum)}"
        if value > self.maximum:
            return f"is above {_plain(self.maximum)}"
        return None


def _finite(value: float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer too large for a float
        return False


def _plain(value: float) -> str:
    """``31536000.0`` -> ``"31,536,000"``; ``0.5`` -> ``"0.5"``: bounds as people read them."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,}"


def entry_name(name: str, unit: Unit | None) -> str:
    """A setting's form field: its name, with the unit it is entered in when that is not seconds
    or a plain count (``fairshare_half_life_days``, ``reclaim_guaranteed_share_percent``)."""
    if unit is None or not unit.suffix or unit is SECONDS:
        return name
    return f"{name.removesuffix('_s').removesuffix('_ratio')}_{unit.suffix}"


@dataclass(frozen=True, slots=True)
class Declared:
    """What `knob` puts in a field's metadata; the field's name, type and default complete it."""

    label: str
    help: str
    unit: Unit | None
    bounds: tuple[float, float] | None
    choices: Mapping[str, str]
    stored_as: str | None
    stored: bool
    replay: bool


def knob(
    default: Any,
    label: str,
    help: str,
    unit: Unit | None = None,
    *,
    bounds: tuple[float, float] | None = None,
    choices: Mapping[str, str] | None = None,
    stored_as: str | None = None,
    scope: str = ADMIN,
) -> Any:
    """A `Policy` field with its default and its declaration (see `Knob`). A number has a unit
    and ``bounds`` (stored units, both ends included); a choice its ``choices`` (value: label).
    ``stored_as``: the public name when it is not the field's own (a name admins knew first).
    ``scope``: who may change it (`ADMIN`, `ENGINE`, `INTERNAL`)."""
    if (unit is None) != (bounds is None):
        raise ValueError(f"{label}: a number has both a unit and bounds, a switch or a choice neither")
    if scope not in SCOPES:
        raise ValueError(f"{label}: scope {scope!r} is not one of {', '.join(SCOPES)}")
    stored, replay = SCOPES[scope]
    declared = Declared(label, help, unit, bounds, dict(choices or {}), stored_as, stored, replay)
    return field(default=default, metadata={KNOB: declared})


def knob_parts(default: tuple[tuple[str, float], ...], *parts: Knob) -> Any:
    """A `Policy` field stored as several knobs, one per entry of its ``(key, value)`` tuple
    (`Policy.level_penalty`: one knob per level)."""
    return field(default=default, metadata={PARTS: parts})


def knobs_of(cls: type) -> tuple[Knob, ...]:
    """The knobs declared on a dataclass, in field order; a field declared without `knob` is an
    error (every engine setting is declared)."""
    found: list[Knob] = []
    for each in fields(cls):
        if PARTS in each.metadata:
            found.extend(replace(part, engine=each.name) for part in each.metadata[PARTS])
            continue
        declared = each.metadata.get(KNOB)
        if declared is None:
            raise TypeError(f"{cls.__name__}.{each.name} is not declared with knob()")
        # "float | None" (annotations are strings here) or the type itself.
        annotation = each.type.__name__ if isinstance(each.type, type) else str(each.type)
        kind = KINDS[annotation.split("|")[0].strip()]
        found.append(
            Knob(
                name=declared.stored_as or each.name,
                kind=kind,
                default=each.default,
                label=declared.label,
                help=declared.help,
                unit=declared.unit,
                minimum=None if declared.bounds is None else declared.bounds[0],
                maximum=None if declared.bounds is None else declared.bounds[1],
                nullable="None" in annotation,
                choices=tuple(declared.choices.items()),
                engine=each.name,
                stored=declared.stored,
                replay=declared.replay,
            )
        )
    return tuple(found)
