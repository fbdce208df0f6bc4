"""Hooks for every test. Everything that needs Django lives in tests/django_fixtures.py, loaded
only when pytest-django is: the engine and simulator tests are plain Python and run without it
(``make test-pure``)."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.has_plugin("django"):
        config.pluginmanager.import_plugin("tests.django_fixtures")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Browser tests run last: Playwright's sync API keeps an event loop running in the main
    thread for as long as the browser is open, which async tests cannot share."""
    items.sort(key=lambda item: item.get_closest_marker("browser") is not None)
