from __future__ import annotations

from django.urls import path

from portal.consumers import FleetConsumer

websocket_urlpatterns = [
    path("ws/fleet/", FleetConsumer.as_asgi()),
]
