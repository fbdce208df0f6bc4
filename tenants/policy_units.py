"""The fleet policy in people's units: what each stored field is called, in which unit it is
shown and entered, and what it does. The policy form and the audit log both read this table, so
a half-life is "7 days" on both, never "604800.0".

The settings themselves (label, help, unit, bounds, default) are declared once, on the engine's
``Policy`` and beside it (`scheduling.engine.policy_settings`); this module adds how the portal
shows them: the form field's name and each range in words. Stored values keep the model's units
(seconds, ratios); a unit converts with ``to_shown`` and ``to_stored`` (affine: ``shown =
(stored - offset) / factor``).

The bounds, in stored units, both ends included, are read by the model's validators (so
``full_clean``, the services and the API), the policy form (in its own units, the range said in
its help) and the scheduling cycle's check of the stored row (`tenants.selectors.
fleet_policy_for_cycle`). They are what makes sense for a fleet: a heartbeat every second to every
ten minutes, a node dead after at most twenty missed ones, shares within 0-100 %, waits up to
thirty days; a value past them (``1e16`` s between heartbeats) stops being a policy and starts
breaking arithmetic."""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.engine import policy_settings
from scheduling.engine.knobs import COUNT as COUNT
from scheduling.engine.knobs import DAY_S as DAY_S
from scheduling.engine.knobs import DAYS as DAYS
from scheduling.engine.knobs import HOUR_S as HOUR_S
from scheduling.engine.knobs import HOURS as HOURS
from scheduling.engine.knobs import MAX_WAIT_S as MAX_WAIT_S
from scheduling.engine.knobs import MINUTES as MINUTES
from scheduling.engine.knobs import PERCENT as PERCENT
from scheduling.engine.knobs import PERCENT_OVER_ONE as PERCENT_OVER_ONE
from scheduling.engine.knobs import SECONDS as SECONDS
from scheduling.engine.knobs import Knob, Unit, entry_name
from scheduling.limits import quantity


@dataclass(frozen=True, slots=True)
class PolicyField:
    """A stored policy setting as the portal shows it: its declaration (`Knob`, on the engine's
    `Policy` or among the fleet settings) with its form field's name and its range in words."""

    knob: Knob

    @property
    def name(self) -> str:  # the model's field, the API's field, the audit log's key
        return self.knob.name

    @property
    def label(self) -> str:
        return self.knob.label

    @property
    def help(self) -> str:
        return self.knob.help

    @property
    def unit(self) -> Unit | None:  # None: not a number (a switch or a choice)
        return self.knob.unit

    @property
    def minimum(self) -> float | None:  # stored units, included
        return self.knob.minimum

    @property
    def maximum(self) -> float | None:
        return self.knob.maximum

    @property
    def form_name(self) -> str:
        return entry_name(self.name, self.knob.unit)

    @property
    def shown_bounds(self) -> tuple[float, float]:
        """(minimum, maximum) in the form's units: ``(0.1, 365.0)`` days for the half-life."""
        assert self.unit is not None and self.minimum is not None and self.maximum is not None, self.name
        low, high = self.unit.to_shown(self.minimum), self.unit.to_shown(self.maximum)
        assert low is not None and high is not None
        return low, high

    @property
    def shown_range(self) -> str:
        """The bounds in the form's units: "between 0.1 and 365 days"."""
        assert self.unit is not None
        low, high = self.shown_bounds
        return f"between {quantity(low)} and {quantity(high)}{self.unit.symbol}"

    @property
    def stored_range(self) -> str:
        """The bounds in the API's units (seconds, ratios), and in the form's when they differ:
        "between 8,640 and 31,536,000 s (0.1 to 365 days)"."""
        assert self.unit is not None and self.minimum is not None and self.maximum is not None
        suffix = " s" if self.name.endswith("_s") else ""
        text = f"between {quantity(self.minimum)} and {quantity(self.maximum)}{suffix}"
        if self.unit.factor != 1.0 or self.unit.offset != 0.0:
            low, high = self.shown_bounds
            text += f" ({quantity(low)} to {quantity(high)}{self.unit.symbol})"
        return text

    def problem(self, value: object) -> str | None:
        """Why a stored number ``value`` cannot be used ("is not finite", "is above 600"), or None.
        A switch or a choice is checked by the model's own field; None is for the caller to allow."""
        if self.unit is None or value is None:
            return None
        return self.knob.problem(value)


# Every stored setting, in the declaration's order (the policy form's and the API's).
POLICY_FIELDS: tuple[PolicyField, ...] = tuple(PolicyField(knob) for knob in policy_settings.STORED)
BY_NAME = {field.name: field for field in POLICY_FIELDS}


def shown_text(name: str, value: object) -> str:
    """A stored policy value as people read it: ``604800.0`` -> ``7 days``, ``1.15`` -> ``15 %``."""
    field = BY_NAME.get(name)
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if field is None or field.unit is None or not isinstance(value, int | float):
        return str(value)
    shown = field.unit.to_shown(float(value))
    if shown is None:
        return "none"
    symbol = field.unit.singular if shown == 1 and field.unit.singular else field.unit.symbol
    return f"{shown:g}{symbol}"
