"""What makes each of the cycle's memos stale, declared beside it (`cycle_state.Memo`).

Every memo field is made with `field(..., metadata=stale_when(Until.X))`, naming the one change
after which its answers may be wrong:

- `Until.STATE`: the working state changes (a start, an eviction or shrink, a reservation).
  Entries carry the `Memo.generation` they were found in; `Memo.invalidate` moves it.
- `Until.LEDGER`: the quota ledger changes. Entries carry the `QuotaLedger.version` they read.
- `Until.LEDGER_OR_FREE`: the quota ledger or the accelerator's free GPUs change (admissions:
  entries carry both; a reservation leaves them alone).
- `Until.PASS`: the pass over the queue ends (`Memo.new_pass` empties them).
- `Until.CYCLE`: nothing within the cycle (a new cycle starts with a new `Memo`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from enum import Enum
from typing import Any

_KEY = "stale-when"


class Until(Enum):
    """When a memo's answers go stale."""

    STATE = "the working state changes"
    LEDGER = "the quota ledger changes"
    LEDGER_OR_FREE = "the quota ledger or the accelerator's free GPUs change"
    PASS = "the pass over the queue ends"
    CYCLE = "the cycle ends"


def stale_when(until: Until) -> Mapping[str, Until]:
    """A memo field's metadata: what invalidates it."""
    return {_KEY: until}


def rules(memo_class: Any) -> dict[str, Until]:
    """Each memo field of a dataclass and what invalidates it (fields that declare nothing, such as
    the generation itself, are left out)."""
    return {item.name: item.metadata[_KEY] for item in fields(memo_class) if _KEY in item.metadata}


def fields_until(memo_class: Any, until: Until) -> tuple[str, ...]:
    """The memo fields of a dataclass that go stale when `until` happens."""
    return tuple(name for name, rule in rules(memo_class).items() if rule is until)
