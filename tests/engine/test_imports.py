from __future__ import annotations

import ast
import sys
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "scheduling" / "engine"
FORBIDDEN = {"time", "datetime", "random", "django", "os", "io", "socket", "pathlib", "subprocess", "threading"}


def _imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_the_engine_imports_only_the_standard_library() -> None:
    for path in sorted(ENGINE.glob("*.py")):
        outside = {root for root in _imported_roots(path) if root not in sys.stdlib_module_names}
        assert outside == set(), f"{path.name} imports {outside}"


def test_the_engine_has_no_clock_randomness_or_io() -> None:
    for path in sorted(ENGINE.glob("*.py")):
        assert _imported_roots(path) & FORBIDDEN == set(), path.name
        assert "open(" not in path.read_text(), path.name
