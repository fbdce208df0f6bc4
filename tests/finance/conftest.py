"""Finance tests share the scheduling tests' modelled fleet (``fleet``) and forget the cached
fleet epoch between tests, each of which builds its own fleet."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scheduling.fleet_calendar import fleet_epoch_forget
from tests.scheduling.conftest import fleet  # noqa: F401  (the fixture)


@pytest.fixture(autouse=True)
def _fresh_epoch() -> Iterator[None]:
    fleet_epoch_forget()
    yield
    fleet_epoch_forget()
