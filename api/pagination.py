from __future__ import annotations

from rest_framework.pagination import CursorPagination


class IdCursorPagination(CursorPagination):
    """Newest first by id: stable while rows are added, unlike page numbers."""

    ordering = "-id"
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500
