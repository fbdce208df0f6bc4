"""ASGI entry point: HTTP through Django, websockets through Channels with session auth."""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import django
from asgiref.sync import sync_to_async
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.http import FileResponse, HttpRequest, HttpResponseBase
from django.urls import set_script_prefix

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
django.setup(set_prefix=False)


# Threads kept for requests in each process: as many as requests it answers at once, at most this.
KEPT_THREADS = 64


class OneHopASGIHandler(ASGIHandler):
    """Django's ASGI handler with the middleware chain and the view run together in one worker
    thread, as under WSGI.

    Every view and middleware of Fleetline is synchronous. Django's own handler runs the chain in
    async mode, so each of the sync middleware (sessions, CSRF, auth, messages, ...) crosses from
    the event loop to a worker thread and back on its own: a dozen thread hops per request, about
    a third of a simple API call's CPU. Here the request is read, answered and streamed as Django
    does it, but the chain is built in sync mode and entered once."""

    def __init__(self) -> None:
        super().__init__()
        self._idle_threads: list[ThreadPoolExecutor] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Django's entry point without its ``ThreadSensitiveContext``, which gave each request a
        thread of its own by starting one (and joining it) per request: a millisecond of a simple
        page's CPU. `handle` lends each request a kept thread instead."""
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        await self.handle(scope, receive, send)

    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)

    async def get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        response: HttpResponseBase = await sync_to_async(self.get_response, thread_sensitive=True)(request)
        return response

    async def handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Django's ``handle`` with one thread hop per request instead of three: the
        ``request_started`` signal, the request, the response and, unless it streams, its close
        (``request_finished``: the database connection goes back to the pool) run together in
        the request's thread: one of the handler's kept threads, lent to this request alone until
        it ends (concurrent requests run in threads of their own, as under Django's handler). A
        streaming response is closed there after it has been sent, as Django does. A client that
        goes away meanwhile is noticed when the answer is sent (a sync view runs to its end
        either way)."""
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))
        thread = self._idle_threads.pop() if self._idle_threads else ThreadPoolExecutor(1, "request")
        try:
            response = await sync_to_async(self.respond, thread_sensitive=False, executor=thread)(scope, body_file)
            try:
                await self.send_response(response, send)
            except asyncio.CancelledError:
                pass  # the client went away while the answer was sent
            finally:
                if response.streaming:
                    await sync_to_async(response.close, thread_sensitive=False, executor=thread)()
        finally:
            body_file.close()
            if len(self._idle_threads) < KEPT_THREADS:
                self._idle_threads.append(thread)
            else:
                thread.shutdown(wait=False)

    def respond(self, scope: dict[str, Any], body_file: Any) -> HttpResponseBase:
        signals.request_started.send(sender=self.__class__, scope=scope)
        request, error_response = self.create_request(scope, body_file)
        response = self.get_response(request) if request is not None else error_response
        assert response is not None  # create_request gives a request or the answer refusing it
        response._handler_class = self.__class__  # type: ignore[attr-defined]  # what close() signals with
        if isinstance(response, FileResponse):
            response.block_size = self.chunk_size
        if not response.streaming:
            response.close()
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

from portal.heap import settle_for_requests  # noqa: E402

settle_for_requests()
