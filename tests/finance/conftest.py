"""Finance tests share the scheduling tests' modelled fleet (``fleet``); each test forgets the
cached fleet epoch (``tests/django_fixtures.py``), as each builds its own fleet."""

from __future__ import annotations

from tests.scheduling.conftest import fleet  # noqa: F401  (the fixture)
