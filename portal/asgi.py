"""ASGI entry point: HTTP through Django, websockets through Channels with session auth."""

from __future__ import annotations

import os

import django
from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.http import HttpRequest, HttpResponseBase

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
django.setup(set_prefix=False)


class OneHopASGIHandler(ASGIHandler):
    """Django's ASGI handler with the middleware chain and the view run together in one worker
    thread, as under WSGI.

    Every view and middleware of Fleetline is synchronous. Django's own handler runs the chain in
    async mode, so each of the sync middleware (sessions, CSRF, auth, messages, ...) crosses from
    the event loop to a worker thread and back on its own: a dozen thread hops per request, about
    a third of a simple API call's CPU. Here the request is read, answered and streamed as Django
    does it, but the chain is built in sync mode and entered once."""

    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)

    async def get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        response: HttpResponseBase = await sync_to_async(self.get_response, thread_sensitive=True)(request)
        return response


django_asgi_app = OneHopASGIHandler()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from portal.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
