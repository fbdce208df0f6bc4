"""The v1 router. Another app adds its resources from its ``AppConfig.ready()`` (the URLconf is
read after every app is ready), for example::

    from api.router import router
    router.register("simulations", SimulationViewSet, basename="simulation")
"""

from __future__ import annotations

from rest_framework.routers import DefaultRouter

router = DefaultRouter()
