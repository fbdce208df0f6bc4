"""One error format for every v1 endpoint (drf-standardized-errors):

    {"type": "validation_error" | "client_error" | "server_error",
     "errors": [{"code": "...", "detail": "...", "attr": "field" | null}]}

Services raise Django's exceptions; they are translated here, once, instead of in each view. While
the database or Redis is unreachable the answer is 503 with ``Retry-After`` rather than a 500.
``ApiExceptionHandler`` is drf-standardized-errors' handler class (``DRF_STANDARDIZED_ERRORS``)."""

from __future__ import annotations

import logging
from typing import Any

import redis
from django.core.exceptions import ObjectDoesNotExist, PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import InterfaceError, OperationalError
from drf_standardized_errors.handler import ExceptionHandler
from drf_standardized_errors.openapi_serializers import ClientErrorEnum, ServerErrorEnum
from rest_framework import exceptions, serializers, status

logger = logging.getLogger(__name__)

# How long a client should wait before retrying while the database or Redis is unreachable.
RETRY_AFTER_S = 5
# What the API cannot work without: the database (jobs) and Redis (pending reasons).
DEPENDENCY_ERRORS: tuple[type[Exception], ...] = (OperationalError, InterfaceError, redis.RedisError)


class ServiceUnavailable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = f"Briefly unavailable: retry in {RETRY_AFTER_S} s."
    default_code = "service_unavailable"


class Conflict(exceptions.APIException):
    """The request is well formed but the resource's state refuses it (a job that has ended)."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = "The resource's state does not allow this."
    default_code = "conflict"


class Gone(exceptions.APIException):
    """A retired route: what replaces it is named in the message and in a ``Link`` header."""

    status_code = status.HTTP_410_GONE
    default_code = "gone"

    def __init__(self, *, successor: str) -> None:
        super().__init__(f"This route is retired: use {successor} (API v1).")
        self.successor = successor


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
        if isinstance(exc, Gone):
            headers["Link"] = f'<{exc.successor}>; rel="successor-version"'
        return headers


class _Error400(serializers.Serializer):
    code = serializers.CharField(help_text="Machine-readable: invalid, required, blank, parse_error, ...")
    detail = serializers.CharField(help_text="What is wrong, in words.")
    attr = serializers.CharField(allow_null=True, help_text="The field at fault; null for the request as a whole.")


class ErrorResponse400Serializer(serializers.Serializer):
    """One shape for every 400: the body could not be read (client_error) or a field or the
    request as a whole is invalid (validation_error), each problem with the field it is about."""

    type = serializers.ChoiceField(choices=[("validation_error", "validation_error"), ("client_error", "client_error")])
    # A field named like Serializer.errors: DRF's metaclass moves declared fields out of the class,
    # so the property stays; mypy sees only the class body.
    errors = _Error400(many=True)  # type: ignore[assignment]


class _Error409(serializers.Serializer):
    code = serializers.ChoiceField(choices=[("conflict", "conflict")])
    detail = serializers.CharField()
    attr = serializers.CharField(allow_null=True)


class ErrorResponse409Serializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=ClientErrorEnum.choices)
    # A field, not the property: see ErrorResponse400Serializer.
    errors = _Error409(many=True)  # type: ignore[assignment]


class _Error503(serializers.Serializer):
    code = serializers.ChoiceField(choices=[("service_unavailable", "service_unavailable")])
    detail = serializers.CharField()
    attr = serializers.CharField(allow_null=True)


class ErrorResponse503Serializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=ServerErrorEnum.choices)
    # A field, not the property: see ErrorResponse400Serializer.
    errors = _Error503(many=True)  # type: ignore[assignment]
