"""The engine's modules import one another without a circle.

Every import between `scheduling/engine` modules counts: at the top of a module, inside a function
and under `TYPE_CHECKING` (a type-only import still ties the two modules' designs together). The
graph must be acyclic: no edge is excused. (`Snapshot` once carried the fast path's kept state, so
`model` named `ordering` and `prepare`; that state now travels beside it, `kept.Kept`.)
"""

from __future__ import annotations

import ast
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "scheduling" / "engine"
PACKAGE = "scheduling.engine"


def _engine_imports(path: Path) -> set[str]:
    """The engine modules `path` imports, by module name (`model`, `quota`, ...)."""
    modules = {p.stem for p in ENGINE.glob("*.py")}
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:
                names = [node.module] if node.module else [alias.name for alias in node.names]
            elif node.level == 0 and node.module and node.module.startswith(PACKAGE + "."):
                names = [node.module.removeprefix(PACKAGE + ".")]
            elif node.level == 0 and node.module == PACKAGE:
                names = [alias.name for alias in node.names]
            else:
                continue
        elif isinstance(node, ast.Import):
            names = [alias.name.removeprefix(PACKAGE + ".") for alias in node.names if alias.name.startswith(PACKAGE)]
        else:
            continue
        found.update(name.split(".")[0] for name in names if name.split(".")[0] in modules)
    found.discard(path.stem)
    return found


def engine_graph() -> dict[str, set[str]]:
    """Each engine module and the engine modules it imports (`__init__` re-exports, left out)."""
    return {path.stem: _engine_imports(path) for path in sorted(ENGINE.glob("*.py")) if path.stem != "__init__"}


def find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of `graph` (its modules in import order, the first repeated at the end), or None."""
    done: set[str] = set()
    path: list[str] = []
    on_path: set[str] = set()

    def visit(module: str) -> list[str] | None:
        path.append(module)
        on_path.add(module)
        for imported in sorted(graph.get(module, ())):
            if imported in on_path:
                return [*path[path.index(imported) :], imported]
            if imported not in done:
                circle = visit(imported)
                if circle is not None:
                    return circle
        path.pop()
        on_path.discard(module)
        done.add(module)
        return None

    for module in sorted(graph):
        if module not in done:
            circle = visit(module)
            if circle is not None:
                return circle
    return None


def test_the_engine_modules_import_one_another_without_a_circle() -> None:
    assert find_circle(engine_graph()) is None


def test_the_data_types_import_no_module_of_the_cycle() -> None:
    """`model` (the snapshot's data types) leans on nothing but the settings' and the shared
    vocabulary's declarations and the progress arithmetic, never on what reads it."""
    assert engine_graph()["model"] <= {"knobs", "progress", "vocabulary"}


def test_the_circle_finder_names_the_modules_of_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}

    assert find_circle(graph) == ["a", "b", "c", "a"]
    assert find_circle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_the_graph_sees_imports_under_type_checking_and_inside_functions(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from .ordering import QueueView\n"
        "def f():\n    from .quota import QuotaLedger\n"
        "from scheduling.engine.plan import Plan\n"
        "from . import capacity\n"
    )

    assert _engine_imports(sample) == {"ordering", "quota", "plan", "capacity"}
