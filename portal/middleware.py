"""Refuse over-long query strings with 414 URI Too Long, as a response rather than a dropped
connection.

No page or API of Fleetline takes more than a few hundred bytes of query string. The ASGI servers
differ above that: uvicorn hands a 30 kB query string to Django, and daphne (Twisted) closes the
connection without a word once the request line passes 16,384 bytes. Refusing everything above
``MAX_QUERY_STRING_BYTES`` here, well below daphne's line limit, gives one answer on both servers
for every length daphne can read; past 16 kB only uvicorn, the production server, answers (414).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from inspect import iscoroutinefunction

from django.http import HttpRequest, HttpResponse
from django.utils.decorators import sync_and_async_middleware

MAX_QUERY_STRING_BYTES = 8_192

Handler = Callable[[HttpRequest], HttpResponse]
AsyncHandler = Callable[[HttpRequest], Awaitable[HttpResponse]]


def _refusal(request: HttpRequest) -> HttpResponse | None:
    length = len(request.META.get("QUERY_STRING", ""))
    if length <= MAX_QUERY_STRING_BYTES:
        return None
    message = f"The query string is {length:,} bytes long; this site takes at most {MAX_QUERY_STRING_BYTES:,}.\n"
    return HttpResponse(message, status=414, content_type="text/plain; charset=utf-8")


@sync_and_async_middleware
def query_string_limit(get_response: Handler | AsyncHandler) -> Handler | AsyncHandler:
    if iscoroutinefunction(get_response):
        async_response: AsyncHandler = get_response

        async def async_middleware(request: HttpRequest) -> HttpResponse:
            return _refusal(request) or await async_response(request)

        return async_middleware

    sync_response: Handler = get_response  # type: ignore[assignment]

    def middleware(request: HttpRequest) -> HttpResponse:
        return _refusal(request) or sync_response(request)

    return middleware
