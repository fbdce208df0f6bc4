"""The project's packages import one another one way: the base package (`core`) imports no app,
the apps import the base and one another without a circle, the API builds on the apps, and
`portal`, the shell (settings, ASGI, URLs, the supervisor), sits on top of all.

Every import counts: at the top of a module, inside a function and under `TYPE_CHECKING`. The
imports that still point up today are listed in `KNOWN_BACK_EDGES`, by importing package and
imported module; the graph without them must have no circle, and each listed edge must still
exist, so the list can only shrink.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import pytest

from tests.engine.test_import_graph import find_circle

ROOT = Path(__file__).resolve().parent.parent

# The higher a package's layer, the more it may import; a package imports only lower layers, and
# packages of one layer (the apps) import one another without a circle.
LAYER = {
    "core": 0,
    "tenants": 1,
    "scheduling": 1,
    "finance": 1,
    "simulations": 1,
    "observability": 1,
    "api": 2,
    "portal": 3,
}

# (importing package, imported module) for each import that points up a layer or closes a circle
# between apps today. Take an entry off when its last import is gone.
KNOWN_BACK_EDGES = frozenset(
    {
        # Tenants keeps quotas and memberships in the scheduler's terms (engine vocabulary, the
        # models and limits), and scheduling reads teams and quotas from tenants.
        ("tenants", "scheduling.engine"),
        ("tenants", "scheduling.limits"),
        ("tenants", "scheduling.models"),
    }
)


def imported_modules(path: Path) -> set[str]:
    """The project modules `path` imports, as ``package.module`` (``from a import b`` read as ``a.b``)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {".".join(name.split(".")[:2]) for name in names if name.split(".")[0] in LAYER}


def _sources(package: str) -> Iterable[Path]:
    return sorted(p for p in (ROOT / package).rglob("*.py") if "migrations" not in p.parts)


@cache
def module_edges() -> frozenset[tuple[str, str]]:
    """(importing package, imported ``package.module``) for every import between two packages."""
    return frozenset(
        (package, module)
        for package in LAYER
        for path in _sources(package)
        for module in imported_modules(path)
        if module.split(".")[0] != package
    )


def package_graph(edges: Iterable[tuple[str, str]]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {package: set() for package in LAYER}
    for package, module in edges:
        graph[package].add(module.split(".")[0])
    return graph


def test_the_packages_import_one_another_without_a_circle_but_the_known_back_edges() -> None:
    assert find_circle(package_graph(module_edges() - KNOWN_BACK_EDGES)) is None


def test_no_package_imports_a_higher_layer_but_the_known_back_edges() -> None:
    upward = sorted(
        f"{package} imports {module}"
        for package, module in module_edges() - KNOWN_BACK_EDGES
        if LAYER[package] < LAYER[module.split(".")[0]]
    )
    assert upward == []


def test_the_base_package_imports_no_app() -> None:
    assert sorted(m for p, m in module_edges() if p == "core") == []


@pytest.mark.parametrize(("package", "module"), sorted(KNOWN_BACK_EDGES))
def test_each_known_back_edge_is_still_there(package: str, module: str) -> None:
    """When the last such import is gone, take the edge off the list."""
    assert (package, module) in module_edges()


def test_the_graph_sees_imports_inside_functions_and_under_type_checking(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from portal.groups import FLEET_GROUP\n"
        "def f():\n    import scheduling.live.feed\n"
        "from tenants import selectors\n"
        "from django.db import models\n"
    )

    assert imported_modules(sample) == {"portal.groups", "scheduling.live", "tenants.selectors"}


def test_a_circle_between_two_apps_is_seen() -> None:
    graph = package_graph({("finance", "tenants.selectors"), ("tenants", "finance.models")})

    assert find_circle(graph) == ["finance", "tenants", "finance"]


def test_only_tasks_modules_import_tasks_modules() -> None:
    """Tasks call services; services queue tasks by name through `core.tasks`, so no import circle
    runs through a `tasks` module."""
    offenders = sorted(
        f"{path.relative_to(ROOT)} imports {module}"
        for package in LAYER
        if package != "portal"
        for path in _sources(package)
        if path.name != "tasks.py"
        for module in imported_modules(path)
        if module.endswith(".tasks") and module != "core.tasks"
    )
    assert offenders == []
