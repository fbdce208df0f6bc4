"""Every policy setting, from its one declaration: the engine's `Policy` fields (`model.py`) and
the fleet settings the engine does not read (quota approval, failure detection, reports),
declared here.

Each surface reads its list from here: `STORED` is the stored fleet policy (one column each), the
policy form, the API and the audit log; `ENGINE_ONLY` the engine settings every cycle runs at
their defaults (listed on the policy page); `REPLAY` the settings a what-if replay may change;
`TWEAKS` the simulator's tweaks. `policy_from` and `policy_with` turn values keyed by those names
into the engine's `Policy`. Adding a setting is one `knob(...)` on `Policy` (docs/engine.md,
"Adding a policy setting").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from .detector import DetectorPolicy
from .knobs import COUNT, PERCENT, PERCENT_OVER_ONE, SECONDS, Knob, knobs_of
from .model import Policy

_DETECTOR = DetectorPolicy()

CHARGE_MODEL_LABELS: dict[str, str] = {
    "usage": "Usage: allocated GPU-hours x rate",
    "guarantee": "Guarantee: reserved GPUs x hours x rate, plus borrowed GPU-hours x rate",
}

# Settings the fleet keeps beside the engine's policy; the engine's detector defaults are theirs.
FLEET_SETTINGS: tuple[Knob, ...] = (
    Knob(
        name="guarantee_overcommit_ratio",
        kind=float,
        default=1.0,
        label="Guarantees may total",
        help="Of the fleet's GPUs of each accelerator type, how much the guarantees approved may add up to; "
        "above 100 % some guarantees cannot all be honoured at once.",
        unit=PERCENT,
        minimum=0.01,
        maximum=10.0,
        replay=False,
    ),
    Knob(
        name="heartbeat_interval_s",
        kind=float,
        default=_DETECTOR.heartbeat_interval_s,
        label="Heartbeat interval",
        help="How often every node reports that it is alive.",
        unit=SECONDS,
        minimum=1.0,
        maximum=600.0,
        replay=False,
    ),
    Knob(
        name="dead_after_missed_heartbeats",
        kind=int,
        default=_DETECTOR.dead_after_missed,
        label="Dead after missed heartbeats",
        help="A node that misses this many heartbeats in a row is declared dead and its gangs restart elsewhere.",
        unit=COUNT,
        minimum=1,
        maximum=20,
        replay=False,
    ),
    Knob(
        name="slow_threshold",
        kind=float,
        default=_DETECTOR.slow_threshold,
        label="Slow when steps take longer by",
        help="A node whose step time is this much above its gang's median counts as slow.",
        unit=PERCENT_OVER_ONE,
        minimum=1.0,
        maximum=10.0,
        replay=False,
    ),
    Knob(
        name="slow_consecutive_steps",
        kind=int,
        default=_DETECTOR.slow_consecutive_steps,
        label="Slow after consecutive slow steps",
        help="A node is cordoned once it has been slow for this many steps in a row.",
        unit=COUNT,
        minimum=1,
        maximum=100,
        replay=False,
    ),
    Knob(
        name="charge_model",
        kind=str,
        default="usage",
        label="Charge model",
        help="How reports charge teams: for what they used, or for the capacity reserved for them whether used "
        "or not, plus what they borrowed beyond it.",
        choices=tuple(CHARGE_MODEL_LABELS.items()),
        replay=False,
    ),
)

ENGINE_KNOBS: tuple[Knob, ...] = knobs_of(Policy)
KNOBS: tuple[Knob, ...] = ENGINE_KNOBS + FLEET_SETTINGS
BY_NAME: dict[str, Knob] = {knob.name: knob for knob in KNOBS}
STORED: tuple[Knob, ...] = tuple(knob for knob in KNOBS if knob.stored)
ENGINE_ONLY: tuple[Knob, ...] = tuple(knob for knob in ENGINE_KNOBS if not knob.stored)
REPLAY: dict[str, Knob] = {knob.key: knob for knob in ENGINE_KNOBS if knob.replay}
TWEAKS: dict[str, Knob] = {knob.key: knob for knob in ENGINE_KNOBS}
assert len(BY_NAME) == len(KNOBS) and len(TWEAKS) == len(ENGINE_KNOBS), "a setting is declared twice"


def policy_with(policy: Policy, changes: Mapping[str, Any]) -> Policy:
    """``policy`` with the settings named by their `Knob.key` changed (what-if settings, tweaks);
    a topology penalty changes its level's entry of `Policy.level_penalty`, in place."""
    if not changes:
        return policy
    fields: dict[str, Any] = {}
    levels: dict[str, float] = {}
    for key, value in changes.items():
        knob = TWEAKS[key]
        if knob.level is not None:
            levels[knob.level] = value
        else:
            fields[key] = value
    if levels:
        fields["level_penalty"] = tuple((level, levels.get(level, factor)) for level, factor in policy.level_penalty)
    return replace(policy, **fields)


def policy_from(stored: Mapping[str, Any]) -> Policy:
    """The engine policy from stored values by public name (`Knob.name`); a stored engine knob
    missing from ``stored`` keeps the engine's default, fleet settings are not the engine's."""
    fields: dict[str, Any] = {}
    for knob in STORED:
        if knob.engine is not None and knob.name in stored:
            fields[knob.key] = stored[knob.name]
    return policy_with(Policy(), fields)


def parse_text(key: str, text: str) -> Any:
    """A tweak's value from the command line ("on"/"off" for a switch, "none" for an unset bound,
    a number, a choice), checked against the declaration; ValueError says why it is refused."""
    knob = TWEAKS.get(key)
    if knob is None:
        raise ValueError(f"{key!r} is not a setting of the engine's Policy (one of {', '.join(TWEAKS)})")
    value: Any
    if knob.kind is bool:
        if text not in ("on", "off"):
            raise ValueError(f"{key} is on or off")
        value = text == "on"
    elif text == "none" and knob.nullable:
        value = None
    elif knob.kind is str:
        value = text
    else:
        try:
            value = knob.kind(text)
        except ValueError:
            raise ValueError(f"{key} is a number, not {text!r}") from None
    problem = knob.problem(value)
    if problem is not None:
        raise ValueError(f"{key} = {text} {problem}")
    return value
