"""One error format for every v1 endpoint (drf-standardized-errors):

    {"type": "validation_error" | "client_error" | "server_error",
     "errors": [{"code": "...", "detail": "...", "attr": "field" | null}]}

Services raise Django's exceptions; they are translated here, once, instead of in each view. While
the database or Redis is unreachable the answer is 503 with ``Retry-After`` rather than a 500."""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import ObjectDoesNotExist, PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_standardized_errors.handler import ExceptionHandler
from drf_standardized_errors.types import ExceptionHandlerContext
from rest_framework import exceptions, status
from rest_framework.response import Response

from scheduling.api import DEPENDENCY_ERRORS, RETRY_AFTER_S

logger = logging.getLogger(__name__)


class ServiceUnavailable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = f"Briefly unavailable: retry in {RETRY_AFTER_S} s."
    default_code = "service_unavailable"


class Conflict(exceptions.APIException):
    """The request is well formed but the resource's state refuses it (a job that has ended)."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = "The resource's state does not allow this."
    default_code = "conflict"


def validation_error_from_django(error: DjangoValidationError, *, fields: dict[str, str] | None = None) -> Any:
    """A service's ValidationError as the API's, its keys renamed to the API's field names."""
    fields = fields or {}
    if hasattr(error, "error_dict"):
        return exceptions.ValidationError(
            {fields.get(key, key): messages for key, messages in error.message_dict.items()}
        )
    return exceptions.ValidationError({"non_field_errors": error.messages})


class ApiExceptionHandler(ExceptionHandler):
    def convert_known_exceptions(self, exc: Exception) -> Exception:
        if isinstance(exc, DjangoValidationError):
            return validation_error_from_django(exc)
        if isinstance(exc, PermissionDenied):
            return exceptions.PermissionDenied(str(exc) or None)
        if isinstance(exc, ObjectDoesNotExist):
            return exceptions.NotFound()
        if isinstance(exc, DEPENDENCY_ERRORS):
            request = self.context.get("request")
            logger.warning("%s %s: a dependency is unreachable", request and request.method, request and request.path)
            return ServiceUnavailable()
        return super().convert_known_exceptions(exc)

    def get_headers(self, exc: exceptions.APIException) -> dict[str, str]:
        headers = super().get_headers(exc)
        if isinstance(exc, ServiceUnavailable):
            headers["Retry-After"] = str(RETRY_AFTER_S)
        return headers


def api_exception_handler(exc: Exception, context: ExceptionHandlerContext) -> Response | None:
    return ApiExceptionHandler(exc, context).run()
