"""Execution backends: the cycle decides, a backend carries the decisions out and reports what
happened (``base.Backend``). ``modelled`` computes everything (the embedded default, the demo and
the tests); ``slurm`` drives a real Slurm cluster. The engine and the simulator never import this."""

from __future__ import annotations

from functools import cache

from django.conf import settings

from scheduling.backends.base import Backend


@cache
def _backend(name: str) -> Backend:
    if name == "slurm":
        from scheduling.backends.slurm import SlurmBackend

        return SlurmBackend.from_settings()
    from scheduling.backends.modelled import ModelledBackend

    return ModelledBackend()


def backend_get() -> Backend:
    """The backend ``settings.FLEETLINE_BACKEND`` names (one per process)."""
    return _backend(settings.FLEETLINE_BACKEND)
