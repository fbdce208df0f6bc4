from __future__ import annotations

from django.apps import AppConfig


class SimulationsConfig(AppConfig):
    name = "simulations"
    verbose_name = "What-if replays"
