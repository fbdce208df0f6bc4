"""Import boundaries: the pure engine and simulator import nothing from Django, the web stack or the
apps; above them, each layer imports only downwards."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PURE_PACKAGES = ("scheduling/engine", "scheduling/sim")
FORBIDDEN = (
    "django",
    "rest_framework",
    "channels",
    "channels_redis",
    "celery",
    "daphne",
    "redis",
    "portal",
    "core",
    "fleet",
    "tenants",
    "scheduling.models",
    "scheduling.services",
    "scheduling.cycle",
    "scheduling.live",
    "scheduling.selectors",
    "scheduling.tasks",
)


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def _is_forbidden(module: str) -> bool:
    return any(module == f or module.startswith(f + ".") for f in FORBIDDEN)


@pytest.mark.parametrize("package", PURE_PACKAGES)
def test_pure_packages_import_nothing_from_django_or_the_apps(package: str) -> None:
    offenders = [
        f"{path.relative_to(ROOT)} imports {module}"
        for path in sorted((ROOT / package).rglob("*.py"))
        for module in _imports(path)
        if _is_forbidden(module)
    ]
    assert offenders == []


def test_the_boundary_check_catches_a_django_import(tmp_path: Path) -> None:
    sample = tmp_path / "bad.py"
    sample.write_text("from django.db import models\nimport scheduling.models\n")
    assert [m for m in _imports(sample) if _is_forbidden(m)] == [
        "django.db",
        "scheduling.models",
    ]


# The layers above the engine. Tenants sits below scheduling: of it, tenants may import only the
# pure engine (the policy declarations and vocabulary) and the bounds on numbers, which import
# nothing of tenants or of any app, so no import path leads back. The hardware quotas are counted in
# is the fleet app's, below both; the team pages reach the scheduler through `tenants.team_activity`.
TENANTS_MAY_IMPORT_OF_SCHEDULING = ("scheduling.engine", "scheduling.limits")
LAYER_RULES = (
    # The live cycle does not run user actions; user actions may read the cycle's snapshot.
    ("scheduling/cycle", ("scheduling.services",)),
    # What the cycle leaves for readers reads: the records of a tick come from
    # `scheduling.tick_outcome`, never from the cycle that made them.
    ("scheduling/live", ("scheduling.cycle", "scheduling.services")),
    # Selectors read (the database, and the read models the cycle leaves in `scheduling.live`);
    # they neither write nor run the cycle.
    ("*/selectors.py", ("scheduling.services", "tenants.services", "finance.services", "scheduling.cycle")),
    # Pages and API views read through selectors and act through services, never the cycle itself.
    ("*/views.py", ("scheduling.cycle",)),
    ("*/views", ("scheduling.cycle",)),
    # Tenants sits below the web layer: its services announce through `tenants.signals`, which
    # `portal.socket_receivers` receives; its selectors and models read.
    ("tenants/services", ("portal",)),
    ("tenants/selectors.py", ("portal",)),
    ("tenants/models.py", ("portal",)),
    ("tenants/signals.py", ("portal",)),
    # Channel-layer groups are the publishers' (`scheduling.live`, `core.socket_events`), not services'.
    ("*/services", ("core.groups", "portal.consumers")),
    ("*/services.py", ("core.groups", "portal.consumers")),
)


def _sources(pattern: str) -> list[Path]:
    paths = ROOT.glob(pattern + ("" if pattern.endswith(".py") else "/**/*.py"))
    return sorted(p for p in paths if "migrations" not in p.parts and ".venv" not in p.parts)


def _offenders(paths: list[Path], forbidden: tuple[str, ...]) -> list[str]:
    return [
        f"{path.name} imports {module}"
        if not path.is_relative_to(ROOT)
        else f"{path.relative_to(ROOT)} imports {module}"
        for path in paths
        for module in _imports(path)
        if any(module == f or module.startswith(f + ".") for f in forbidden)
    ]


def _imported(path: Path) -> list[str]:
    """Like `_imports`, with ``from package import module`` read as ``package.module``."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.extend(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def test_tenants_imports_of_scheduling_only_what_imports_nothing_of_tenants() -> None:
    offenders = [
        f"{path.relative_to(ROOT)} imports {module}"
        for path in _sources("tenants")
        for module in _imported(path)
        if _within(module, ("scheduling",)) and not _within(module, TENANTS_MAY_IMPORT_OF_SCHEDULING)
    ]
    assert offenders == []


def test_what_tenants_may_import_of_scheduling_imports_nothing_of_tenants_or_above() -> None:
    lower = [ROOT / "scheduling/limits.py"]
    offenders = [
        f"{path.relative_to(ROOT)} imports {module}"
        for path in lower + _sources("scheduling/engine")
        for module in _imported(path)
        if _within(module, ("tenants",))
        or (_within(module, ("scheduling",)) and not _within(module, TENANTS_MAY_IMPORT_OF_SCHEDULING))
    ]
    assert offenders == []


@pytest.mark.parametrize(("pattern", "forbidden"), LAYER_RULES)
def test_each_layer_imports_only_downwards(pattern: str, forbidden: tuple[str, ...]) -> None:
    paths = _sources(pattern)
    assert paths, f"no modules match {pattern}"
    assert _offenders(paths, forbidden) == []


def test_the_layer_check_sees_imports_inside_functions(tmp_path: Path) -> None:
    sample = tmp_path / "selectors.py"
    sample.write_text("def f():\n    from scheduling.services.jobs import job_submit\n")
    assert _offenders([sample], ("scheduling.services",)) == ["selectors.py imports scheduling.services.jobs"]


# Template tag libraries are imports too: a page of tenants loads no library of the scheduler's
# (the team page gets its queue in words from `scheduling.team_activity`).
_LOAD = re.compile(r"{%\s*load\s+([^%]+?)\s*%}")


def _libraries(app: str) -> set[str]:
    return {path.stem for path in (ROOT / app / "templatetags").glob("*.py") if path.stem != "__init__"}


def _loaded(template: Path) -> set[str]:
    names = set()
    for match in _LOAD.finditer(template.read_text()):
        words = match.group(1).split()
        # ``{% load a b from library %}`` loads some of one library's tags.
        names.update(words[-1:] if "from" in words else words)
    return names


def test_tenants_templates_load_no_template_tags_of_scheduling() -> None:
    scheduling_tags = _libraries("scheduling")
    assert scheduling_tags and not scheduling_tags & _libraries("tenants")
    offenders = [
        f"{template.relative_to(ROOT)} loads {name}"
        for template in sorted((ROOT / "templates/tenants").rglob("*.html"))
        for name in sorted(_loaded(template) & scheduling_tags)
    ]
    assert offenders == []


def test_the_template_check_reads_every_library_a_load_names(tmp_path: Path) -> None:
    sample = tmp_path / "page.html"
    sample.write_text("{% load static %}\n{%load audit  wall_clock %}{% load starts_in from fleet %}")
    assert _loaded(sample) == {"static", "audit", "wall_clock", "fleet"}
