"""Request body parsers for the API that answer 400, never 500, however a body is nested and
whatever its strings hold."""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

# Deeper than any request this API takes (its bodies are flat objects), far below the depth at
# which the JSON decoder runs out of stack.
MAX_JSON_DEPTH = 32


def json_depth_exceeds(document: Any, limit: int) -> bool:
    """Whether ``document`` nests objects and arrays more than ``limit`` deep (iteratively, so
    checking needs no stack)."""
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, Mapping):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def json_has_lone_surrogate(document: Any) -> bool:
    """Whether a key or a string of ``document`` holds a lone UTF-16 surrogate (``"\\ud800"``):
    text that has no UTF-8 form, so that neither an answer quoting it nor the database can hold it."""
    stack: list[Any] = [document]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if not value.isascii() and not _encodes(value):
                return True
        elif isinstance(value, Mapping):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return False


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class BoundedJSONParser(JSONParser):
    """DRF's JSON parser with a nesting limit: a body nested thousands deep makes Python's JSON
    decoder raise RecursionError, which DRF would answer with a 500. A lone surrogate is refused
    here too, once for every field: echoed in an error message, it could not be encoded."""

    def parse(
        self, stream: IO[Any], media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> Any:
        try:
            document = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(f"JSON parse error - nested more than {MAX_JSON_DEPTH} levels deep.") from None
        if json_depth_exceeds(document, MAX_JSON_DEPTH):
            raise ParseError(f"JSON parse error - nested more than {MAX_JSON_DEPTH} levels deep.")
        if json_has_lone_surrogate(document):
            raise ParseError("JSON parse error - a string holds a lone surrogate (\\ud800-\\udfff), which is not text.")
        return document
