"""Page scripts read only what the live events define (``core.live_events``), and pages carry
no inline scripts: their code is in static modules, fed by ``json_script`` and data- attributes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from core.live_events import EVENTS, JOB_CHANGE_FIELDS, PAGE_JOB_KIND, job_change, live_event

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted((ROOT / "static").rglob("*.js"))
HANDLER = re.compile(r"""Fleetline\.live\.on\(\s*"(?P<kind>[\w-]+)"\s*,\s*function\s*\(\s*(?P<name>\w*)\s*\)\s*\{""")


def _body(source: str, opening: int) -> str:
    """The text of the function whose body opens at `opening` (a "{"), up to its matching "}"."""
    depth = 0
    for at in range(opening, len(source)):
        depth += {"{": 1, "}": -1}.get(source[at], 0)
        if depth == 0:
            return source[opening : at + 1]
    raise AssertionError("unbalanced braces")


def _handlers() -> list[tuple[str, str, set[str]]]:
    """(script, event kind, fields read) for every live handler of every static script."""
    found = []
    for script in SCRIPTS:
        source = script.read_text()
        for match in HANDLER.finditer(source):
            name = match["name"]
            body = _body(source, match.end() - 1)
            fields = set(re.findall(rf"\b{name}\.(\w+)", body)) if name else set()
            found.append((script.relative_to(ROOT).as_posix(), match["kind"], fields))
    return found


def _defined(kind: str) -> set[str]:
    if kind == PAGE_JOB_KIND:  # a tick's job changes, one at a time
        return set(JOB_CHANGE_FIELDS) | {"kind"}
    return set(EVENTS[kind][1]) | {"v", "kind"}


def test_the_handlers_are_found() -> None:
    kinds = {kind for _, kind, _ in _handlers()}
    assert {"fleet", "heartbeat", "incident", "job", "notice"} <= kinds


@pytest.mark.parametrize(("script", "kind", "fields"), _handlers(), ids=lambda value: str(value))
def test_a_page_handler_reads_only_fields_its_event_defines(script: str, kind: str, fields: set[str]) -> None:
    assert kind == PAGE_JOB_KIND or kind in EVENTS, f"{script} listens for an undefined event {kind!r}"
    assert fields <= _defined(kind), f"{script}: {sorted(fields - _defined(kind))} not in the {kind} event"


def test_the_field_check_catches_a_field_no_event_defines() -> None:
    source = 'Fleetline.live.on("fleet", function (e) { show(e.utilisation, e.healthy_percent); });'
    match = HANDLER.search(source)
    assert match is not None
    fields = set(re.findall(r"\be\.(\w+)", _body(source, match.end() - 1)))
    assert fields - _defined("fleet") == {"healthy_percent"}


def test_an_event_is_built_with_exactly_its_defined_fields() -> None:
    assert live_event("notice", message="hi", url="", unread=1) == {
        "kind": "notice",
        "message": "hi",
        "url": "",
        "unread": 1,
    }
    with pytest.raises(ValueError, match=r"not defined \['colour'\], defined fields missing \['unread'\]"):
        live_event("notice", message="hi", url="", colour="red")
    with pytest.raises(ValueError, match="no live event"):
        live_event("weather")
    with pytest.raises(ValueError, match="job change"):
        job_change(id=1)


def test_no_template_carries_an_inline_script() -> None:
    inline = [
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "templates").rglob("*.html")
        if re.search(r"<script(?![^>]*\bsrc=)[^>]*>", path.read_text())
    ]
    assert inline == []
