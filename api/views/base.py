"""What every v1 endpoint shares: bearer tokens (or a session), per-user throttling in Redis,
cursor pagination, bounded JSON bodies, the one error format, OPTIONS, and a JSON 404 for paths
that are no endpoint."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema
from drf_standardized_errors.handler import exception_handler
from rest_framework.authentication import BaseAuthentication, SessionAuthentication
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.metadata import BaseMetadata
from rest_framework.pagination import BasePagination
from rest_framework.parsers import BaseParser, FormParser, MultiPartParser
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.schemas.inspectors import ViewInspector
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView
from rest_framework.viewsets import GenericViewSet

from api.authentication import BearerTokenAuthentication
from api.pagination import IdCursorPagination
from api.schema import ApiAutoSchema
from api.throttling import ApiUserThrottle
from core.parsers import BoundedJSONParser
from tenants.permissions import is_fleet_admin

if TYPE_CHECKING:
    from rest_framework.permissions import _PermissionClass


# A numeric id in a URL: ASCII digits (a URL pattern's \d also takes other scripts' digits, which
# int() then refuses or reads as another id), and few enough for any id; longer is a 404.
ID_LOOKUP = r"[0-9]{1,18}"


class ApiMetadata(BaseMetadata):
    """What OPTIONS answers: the endpoint's name, what it reads and writes, and where its
    operations are described. DRF's default also describes a POST's or PUT's input from
    ``serializer_class``, which these views do not have (each operation names its own input);
    the schema is that description."""

    def determine_metadata(self, request: Request, view: APIView) -> dict[str, Any]:
        return {
            "name": view.get_view_name(),
            "description": view.get_view_description(),
            "renders": [renderer.media_type for renderer in view.renderer_classes],
            "parses": [parser.media_type for parser in view.parser_classes],
            "schema": "/api/v1/schema/",
        }


class FilterBackend(DjangoFilterBackend):
    """django-filter's backend, building no filter form for a request that names no filter: the
    form (each of its fields deep-copied) cost a plain list about a tenth of its CPU, to filter
    nothing."""

    def filter_queryset(self, request: Request, queryset: Any, view: APIView) -> Any:
        filterset_class = self.get_filterset_class(view, queryset)
        if filterset_class is not None and not request.query_params.keys() & filterset_class.base_filters.keys():
            return queryset
        return super().filter_queryset(request, queryset, view)


class ApiV1Mixin:
    # Bearer first: DRF answers an anonymous call with the first class's challenge, so the 401
    # carries "WWW-Authenticate: Bearer".
    authentication_classes: Sequence[type[BaseAuthentication]] = [BearerTokenAuthentication, SessionAuthentication]
    permission_classes: Sequence[_PermissionClass] = [IsAuthenticated]
    throttle_classes: Sequence[type[BaseThrottle]] = [ApiUserThrottle]
    parser_classes: Sequence[type[BaseParser]] = [BoundedJSONParser, FormParser, MultiPartParser]
    pagination_class: type[BasePagination] | None = IdCursorPagination
    filter_backends: Sequence[type[Any]] = [FilterBackend]
    metadata_class: str | type[BaseMetadata] | None = ApiMetadata
    schema: ViewInspector | None = ApiAutoSchema()

    def get_exception_handler(self) -> Any:
        # The v1 format for these views (DRF's default handler stays for anything else).
        return exception_handler


class ApiView(ApiV1Mixin, APIView):
    pagination_class = None  # one resource, or a short fixed list


class ApiViewSet(ApiV1Mixin, GenericViewSet):
    pass


@extend_schema(exclude=True)
class NoSuchEndpoint(ApiView):
    """Any path under /api/v1/ that is no endpoint: 404 in the error format, for anyone (the
    endpoints are public in the schema, so saying which exist tells nothing)."""

    authentication_classes: Sequence[type[BaseAuthentication]] = []
    permission_classes: Sequence[_PermissionClass] = [AllowAny]
    throttle_classes: Sequence[type[BaseThrottle]] = []

    def _not_found(self, request: Any, *args: Any, **kwargs: Any) -> Response:
        raise NotFound()

    get = post = put = patch = delete = head = options = _not_found


def require_fleet_admin(request: Request, message: str) -> None:
    """Refuse a fleet admin's operation to anyone else (403: the resource itself is not secret),
    before their input is looked at."""
    if not is_fleet_admin(request.user):
        raise PermissionDenied(message)
