"""Hooks for every test. Everything that needs Django lives in tests/django_fixtures.py, loaded
only when pytest-django is: the engine and simulator tests are plain Python and run without it
(``make test-pure``)."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run of the suite, so that it passes or fails for
# the code and not for the draw; `HYPOTHESIS_PROFILE=explore` draws new examples each run (how
# new counterexamples are found: run it before changing the engine's rules).
settings.register_profile("suite", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "suite"))


def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.has_plugin("django"):
        config.pluginmanager.import_plugin("tests.django_fixtures")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Browser tests run last: Playwright's sync API keeps an event loop running in the main
    thread for as long as the browser is open, which async tests cannot share."""
    items.sort(key=lambda item: item.get_closest_marker("browser") is not None)
