"""What every v1 endpoint shares: bearer tokens (or a session), per-user throttling in Redis,
cursor pagination, bounded JSON bodies and the one error format."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django_filters.rest_framework import DjangoFilterBackend
from drf_standardized_errors.handler import exception_handler
from rest_framework.authentication import BaseAuthentication, SessionAuthentication
from rest_framework.exceptions import PermissionDenied
from rest_framework.pagination import BasePagination
from rest_framework.parsers import BaseParser, FormParser, MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView
from rest_framework.viewsets import GenericViewSet

from api.authentication import BearerTokenAuthentication
from api.pagination import IdCursorPagination
from api.throttling import ApiUserThrottle
from portal.parsers import BoundedJSONParser
from tenants.permissions import is_fleet_admin

if TYPE_CHECKING:
    from rest_framework.permissions import _PermissionClass


class ApiV1Mixin:
    # Bearer first: DRF answers an anonymous call with the first class's challenge, so the 401
    # carries "WWW-Authenticate: Bearer".
    authentication_classes: Sequence[type[BaseAuthentication]] = [BearerTokenAuthentication, SessionAuthentication]
    permission_classes: Sequence[_PermissionClass] = [IsAuthenticated]
    throttle_classes: Sequence[type[BaseThrottle]] = [ApiUserThrottle]
    parser_classes: Sequence[type[BaseParser]] = [BoundedJSONParser, FormParser, MultiPartParser]
    pagination_class: type[BasePagination] | None = IdCursorPagination
    filter_backends: Sequence[type[Any]] = [DjangoFilterBackend]

    def get_exception_handler(self) -> Any:
        # The v1 format for these views (DRF's default handler stays for anything else).
        return exception_handler


class ApiView(ApiV1Mixin, APIView):
    pagination_class = None  # one resource, or a short fixed list


class ApiViewSet(ApiV1Mixin, GenericViewSet):
    pass


def require_fleet_admin(request: Request, message: str) -> None:
    """Refuse a fleet admin's operation to anyone else (403: the resource itself is not secret),
    before their input is looked at."""
    if not is_fleet_admin(request.user):
        raise PermissionDenied(message)
