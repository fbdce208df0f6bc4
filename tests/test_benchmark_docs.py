"""The benchmarks page holds how to run each benchmark and its current figures, one short section
per script; the history behind the figures and the policy defaults is in docs/benchmarks-history.md,
and every pointer to one of its sections names a section that is there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "benchmarks" / "README.md"
HISTORY = ROOT / "docs" / "benchmarks-history.md"
NOT_BENCHMARKS = {"harness.py"}  # what the load benchmarks share
SOURCES = ("scheduling", "tenants", "simulations", "portal", "api", "finance", "observability", "benchmarks")


def _sections(text: str) -> list[str]:
    return re.findall(r"^## (.+)$", text, re.M)


def test_the_page_has_one_short_section_per_benchmark_script() -> None:
    scripts = sorted(p.name for p in (ROOT / "benchmarks").glob("*.py") if p.name not in NOT_BENCHMARKS)
    text = README.read_text(encoding="utf-8")
    named = sorted(heading.split(" ")[0] for heading in _sections(text))
    assert set(scripts) <= set(named), "a benchmark without its section"
    assert len(named) == len(set(named)), "one section per benchmark"
    assert len(text.encode()) < 40_000, "lab notes belong in docs/benchmarks-history.md"
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
        assert section.count("\n") <= 60, f"{section.splitlines()[0]}: more than a screen"


def test_the_history_is_dated_newest_first() -> None:
    dates = [heading[:10] for heading in _sections(HISTORY.read_text(encoding="utf-8"))]
    assert dates and all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", date) for date in dates)
    assert dates == sorted(dates, reverse=True)


def _pointers() -> list[tuple[Path, str]]:
    found = []
    for folder in SOURCES:
        for path in (ROOT / folder).rglob("*.py"):
            # Comments and docstrings wrap: read the text as one line, without the comment marks.
            flat = re.sub(r"\s*\n\s*#?\s*", " ", path.read_text(encoding="utf-8"))
            found += [(path, name) for name in re.findall(r'benchmarks-history\.md, "([^"]+)"', flat)]
            assert not re.search(r'benchmarks/README\.md, "', flat), f"{path}: the README has no such section"
    return found


def test_every_pointer_to_the_history_names_one_of_its_sections() -> None:
    headings = [heading.lower() for heading in _sections(HISTORY.read_text(encoding="utf-8"))]
    pointers = _pointers()
    assert len(pointers) >= 8  # the engine's defaults and the tenants migrations that set them
    for path, name in pointers:
        assert any(name.lower() in heading for heading in headings), f"{path.name}: no section {name!r}"
