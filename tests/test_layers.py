"""The project's packages import one another one way, from the bottom up:

0. the pure scheduler (`scheduling.engine`, `scheduling.sim`, `scheduling.limits`): no Django, no app;
1. the base package (`core`): shared pieces that import no app;
2. `fleet`: the hardware (accelerator types, pods, racks, nodes);
3. `tenants`: teams, people, quotas counted in the fleet's accelerator types, policy, the audit log;
4. the apps built on them (`scheduling`, `finance`, `simulations`, `observability`), which import one
   another without a circle;
5. the API, on the apps;
6. `portal`, the shell (settings, ASGI, URLs, the supervisor), on top of all.

A package imports only its own layer's packages (without a circle) and lower ones: nothing points up,
with no list of exceptions. Every import counts: at the top of a module, inside a function, under
`TYPE_CHECKING`, and relative ones. The pure modules sit inside the scheduling package's folder but
are a layer of their own, below every app, because they import nothing of any (checked here and in
`tests/test_import_boundary.py`): that is what lets tenants take the policy declarations from the
engine without leaning on the scheduler.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import pytest

from tests.engine.test_import_graph import find_circle

ROOT = Path(__file__).resolve().parent.parent

PURE = ("scheduling.engine", "scheduling.sim", "scheduling.limits")
APPS = ("scheduling", "finance", "simulations", "observability")
LAYER = {
    **dict.fromkeys(PURE, 0),
    "core": 1,
    "fleet": 2,
    "tenants": 3,
    **dict.fromkeys(APPS, 4),
    "api": 5,
    "portal": 6,
}
# Top-level packages of the repository that are not part of the product.
NOT_LAYERED = frozenset({"tests"})


def package_of(module: str) -> str | None:
    """The package of LAYER that the dotted ``module`` belongs to (a pure module before its app), or
    None when it is not the project's."""
    parts = module.split(".")
    for size in (2, 1):
        if ".".join(parts[:size]) in LAYER:
            return ".".join(parts[:size])
    return None


def _module_name(path: Path) -> str | None:
    """``scheduling/engine/model.py`` -> ``scheduling.engine.model``; None outside the repository."""
    if not path.is_relative_to(ROOT):
        return None
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(node: ast.ImportFrom, path: Path) -> str | None:
    """The module ``from ... import`` names, relative imports resolved against ``path``'s package."""
    if node.level == 0:
        return node.module
    name = _module_name(path)
    if name is None:
        return None
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imported_modules(path: Path) -> set[str]:
    """The project modules `path` imports, as ``package.module`` (``from a import b`` read as ``a.b``)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (module := _absolute(node, path)):
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return {".".join(name.split(".")[:2]) for name in names if package_of(name) is not None}


def _sources(package: str) -> list[Path]:
    """The modules of ``package`` (a pure module's files count for it, not for its app)."""
    path = ROOT.joinpath(*package.split("."))
    files = [path.with_suffix(".py")] if path.with_suffix(".py").is_file() else sorted(path.rglob("*.py"))
    return [p for p in files if "migrations" not in p.parts and package_of(_module_name(p) or "") == package]


@cache
def module_edges() -> frozenset[tuple[str, str]]:
    """(importing package, imported ``package.module``) for every import between two packages."""
    return frozenset(
        (package, module)
        for package in LAYER
        for path in _sources(package)
        for module in imported_modules(path)
        if package_of(module) != package
    )


def package_graph(edges: Iterable[tuple[str, str]]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {package: set() for package in LAYER}
    for package, module in edges:
        imported = package_of(module)
        assert imported is not None
        graph[package].add(imported)
    return graph


def upward(edges: Iterable[tuple[str, str]]) -> list[str]:
    """The edges that import a higher layer, in words."""
    return sorted(
        f"{package} imports {module}"
        for package, module in edges
        if LAYER[package] < LAYER[package_of(module) or package]
    )


def test_no_package_imports_a_higher_layer() -> None:
    assert upward(module_edges()) == []


def test_the_packages_import_one_another_without_a_circle() -> None:
    assert find_circle(package_graph(module_edges())) is None


def test_the_base_package_imports_no_app() -> None:
    assert sorted(m for p, m in module_edges() if p == "core") == []


@pytest.mark.parametrize("package", PURE)
def test_the_pure_layer_imports_no_django_and_no_app(package: str) -> None:
    paths = _sources(package)
    assert paths, f"no modules for {package}"
    offenders = sorted(
        f"{path.relative_to(ROOT)} imports {name}"
        for path in paths
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path)))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for name in (
            [alias.name for alias in node.names] if isinstance(node, ast.Import) else [_absolute(node, path) or ""]
        )
        if name.split(".")[0] == "django" or package_of(name) not in (*PURE, None)
    )
    assert offenders == []


def test_every_package_of_the_product_has_a_layer() -> None:
    packages = {path.parent.name for path in ROOT.glob("*/__init__.py")} - NOT_LAYERED
    assert sorted(packages - set(LAYER)) == []
    assert all(_sources(package) for package in LAYER)


def test_an_import_that_points_up_is_seen_and_the_pure_engine_is_below_every_app() -> None:
    edges = {
        ("tenants", "scheduling.engine"),
        ("tenants", "scheduling.limits"),
        ("tenants", "scheduling.models"),
        ("scheduling", "api.views"),
        ("fleet", "tenants.models"),
        ("scheduling.engine", "scheduling.models"),
        ("scheduling", "fleet.models"),
    }

    assert upward(edges) == [
        "fleet imports tenants.models",
        "scheduling imports api.views",
        "scheduling.engine imports scheduling.models",
        "tenants imports scheduling.models",
    ]


def test_the_graph_sees_imports_inside_functions_and_under_type_checking(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from portal.groups import FLEET_GROUP\n"
        "def f():\n    import scheduling.live.feed\n"
        "from tenants import selectors\n"
        "from scheduling.engine.knobs import Knob\n"
        "from django.db import models\n"
    )

    assert imported_modules(sample) == {"portal.groups", "scheduling.live", "tenants.selectors", "scheduling.engine"}


def test_the_graph_resolves_relative_imports() -> None:
    path = ROOT / "scheduling" / "engine" / "sample.py"
    tree = ast.parse("from . import model\nfrom .plan import Start\nfrom .. import models\nfrom ..live import feed\n")
    modules = [_absolute(node, path) for node in tree.body if isinstance(node, ast.ImportFrom)]

    assert modules == ["scheduling.engine", "scheduling.engine.plan", "scheduling", "scheduling.live"]
    assert [package_of(f"{m}.x") for m in modules] == ["scheduling.engine"] * 2 + ["scheduling"] * 2


def test_a_circle_between_two_apps_is_seen() -> None:
    graph = package_graph({("finance", "observability.metrics"), ("observability", "finance.models")})

    assert find_circle(graph) == ["finance", "observability", "finance"]


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
