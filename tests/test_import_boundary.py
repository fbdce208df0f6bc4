"""The pure engine and simulator import nothing from Django, the web stack or the apps."""

from __future__ import annotations

import ast
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
