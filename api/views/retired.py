"""The routes before v1, ``/api/jobs/...``: retired. Every method on every one of them answers
410 Gone in the v1 error format, naming its v1 successor in the message and in a ``Link`` header.
Nothing is authenticated, throttled or read: the answer is the same for everyone."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from drf_standardized_errors.handler import exception_handler
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

from api.errors import Gone

V1_JOBS = "/api/v1/jobs/"
# "<id>/" and "<id>/cancel/" have the same paths under v1; "submit/" became a POST to the list.
_JOB_PATH = re.compile(r"(?P<job>\d+)/(?:(?P<cancel>cancel)/)?")


def v1_successor(rest: str) -> str:
    """The v1 path that replaces ``/api/jobs/<rest>``."""
    found = _JOB_PATH.fullmatch(rest)
    if found is None:
        return V1_JOBS
    return f"{V1_JOBS}{found['job']}/" + ("cancel/" if found["cancel"] else "")


class RetiredJobsApi(APIView):
    authentication_classes: Sequence[type[BaseAuthentication]] = []
    permission_classes = [AllowAny]
    throttle_classes: Sequence[type[BaseThrottle]] = []

    def get_exception_handler(self) -> Any:
        return exception_handler

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        # Before the method is looked at: GET, POST, DELETE and the rest all answer Gone.
        raise Gone(successor=v1_successor(kwargs.get("rest") or ""))
