from __future__ import annotations

import re
from typing import Any

from rest_framework.exceptions import ErrorDetail, ValidationError
from rest_framework.exceptions import NotFound as DrfNotFound
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.request import Request

# A position is an id: ASCII digits (with a sign), within what the database's ids can hold.
_POSITION = re.compile(r"-?[0-9]{1,19}")
_MAX_ID = 2**63 - 1


class IdCursorPagination(CursorPagination):
    """Newest first by id: stable while rows are added, unlike page numbers. A cursor is only
    ever one this API made; anything else (not base64, an offset or a position that is no id)
    is a 400 ``invalid_cursor``, before the database sees it."""

    ordering = "-id"
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500

    def decode_cursor(self, request: Request) -> Cursor | None:
        try:
            cursor = super().decode_cursor(request)
        except (DrfNotFound, UnicodeError, ValueError):
            raise invalid_cursor() from None
        if cursor is None or cursor.position is None:
            return cursor
        position: Any = cursor.position
        if not _POSITION.fullmatch(position) or abs(int(position)) > _MAX_ID:
            raise invalid_cursor()
        return cursor


def invalid_cursor() -> ValidationError:
    detail = ErrorDetail("Invalid cursor: use the next or previous link of a page as it is.", code="invalid_cursor")
    return ValidationError({"cursor": [detail]})
