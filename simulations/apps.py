from __future__ import annotations

from django.apps import AppConfig


class SimulationsConfig(AppConfig):
    name = "simulations"
    verbose_name = "What-if replays"

    def ready(self) -> None:
        # The v1 API's URLconf is read after every app is ready: register the resource on its router.
        from api.router import router
        from simulations.api import SimulationViewSet

        router.register("simulations", SimulationViewSet, basename="simulation")
