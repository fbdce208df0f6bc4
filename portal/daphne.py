"""``python -m portal.daphne``: daphne, ``make run``'s web server, leaving request bodies to Django.

Twisted's HTTP request reads a POST's form body itself before daphne hands the request on: it
parses a multipart upload into memory a second time, and answers a body that is no multipart it
can read (no boundary, no part) with a bare ``400 Bad Request`` (no body, no content type, the
connection closed) before the application sees it. Django reads bodies, and the API answers an
unreadable one in its error format, so Twisted is told not to parse them. Everything else is
daphne's own command line."""

from __future__ import annotations

from typing import Any

# daphne ships no type hints.
from daphne import http_protocol  # type: ignore[import-untyped]
from daphne.cli import CommandLineInterface  # type: ignore[import-untyped]


class WebRequest(http_protocol.WebRequest):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **{**kwargs, "parsePOSTFormSubmission": False})


def main() -> None:
    # daphne's HTTP factory makes each connection's requests from this module attribute.
    http_protocol.WebRequest = WebRequest
    CommandLineInterface.entrypoint()


if __name__ == "__main__":
    main()
