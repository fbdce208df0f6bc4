"""The engine and simulator tests are plain Python: they collect and run with pytest-django off
and Django itself unimportable (``make test-pure`` runs them that way)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Collection imports every test module and conftest on the way; a finder that refuses Django
# makes any import of it, direct or through a product module, fail the run.
WITHOUT_DJANGO = """
import sys


class RefuseDjango:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {"django", "pytest_django"}:
            raise ImportError(f"{name} imported by a test that should run without Django")
        return None


sys.meta_path.insert(0, RefuseDjango())
import pytest

sys.exit(pytest.main(sys.argv[1:]))
"""


# pyproject's DJANGO_SETTINGS_MODULE is an option only pytest-django knows.
PURE = ["-p", "no:django", "-W", "ignore::pytest.PytestConfigWarning"]


def test_the_engine_and_simulator_tests_collect_and_one_runs_without_django() -> None:
    """One run does both (a pytest start and a collection of every engine and simulator test module
    costs seconds): it collects all of them, then runs the import tests alone; a collection error
    anywhere fails the run before any test."""
    args = [*PURE, "tests/engine", "tests/sim", "-k", "test_imports.py"]
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_DJANGO, *args], cwd=ROOT, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = done.stdout.strip().splitlines()[-1]
    assert " passed, " in summary and " deselected in " in summary, done.stdout
