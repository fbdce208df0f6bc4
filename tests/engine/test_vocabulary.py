from __future__ import annotations

import pytest

from scheduling.engine import vocabulary
from scheduling.engine.vocabulary import REASON_TEXTS, WAITS_TEXTS, reason_text, reserved_for, waits_text


def _codes(prefix: str) -> dict[str, str]:
    names = vars(vocabulary).items()
    return {name: value for name, value in names if name.startswith(prefix) and isinstance(value, str)}


def test_every_reason_code_has_its_text() -> None:
    codes = _codes("REASON_")
    codes.pop("REASON_RESERVED_PREFIX")

    assert set(codes.values()) == set(REASON_TEXTS)
    assert reason_text(reserved_for("42")) == "nodes are reserved for job #42, which starts first"


def test_every_form_of_what_a_blocked_job_waits_for_has_its_text() -> None:
    assert {code.removesuffix(":") for code in _codes("WAITS_").values()} == set(WAITS_TEXTS)


@pytest.mark.parametrize(
    ("waits_for", "text"),
    [
        ("quota-limit:7", "never, at this size: more GPUs than team 7 may use (guarantee plus borrow limit)"),
        ("job:12", "when job #12 ends, beyond the next 30 days"),
        ("domain:rack", "when a rack of the fleet has enough healthy nodes for it"),
        # No number of healthy nodes makes a gang larger than a node fit within one.
        ("domain:node", "never, at this size: more GPUs than one node holds"),
        ("queue", "after more than 30 days of work queued ahead of it"),
        ("something-new", "something-new"),
        (None, "unknown"),
    ],
)
def test_what_a_blocked_job_waits_for_reads_as_a_sentence(waits_for: str | None, text: str) -> None:
    assert waits_text(waits_for, horizon_s=30 * 86400.0) == text


def test_an_unknown_reason_is_shown_as_it_is() -> None:
    assert (reason_text("capacity"), reason_text("odd"), reason_text("")) == ("waiting for free GPUs", "odd", "—")
