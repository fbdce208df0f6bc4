"""REST API for jobs: one view per operation, validate -> one service -> serialize.

Submission is idempotent with an ``Idempotency-Key`` header (as payment APIs do): a client that
retries after a timeout or an error gets the job its first attempt made, never a second one. When
the database or Redis is down the API answers 503 with ``Retry-After`` instead of a 500.

These routes predate API v1 (``api/``) and keep answering until clients have moved; each answer
carries ``Deprecation`` and a ``Link`` to its successor.
"""

from __future__ import annotations

import logging
from typing import Any, cast

import redis
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import InterfaceError, OperationalError
from django.db.models import QuerySet
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.auth import signed_in_user
from portal.compiled_queries import CompiledQuery, attnames, instance_from
from portal.parsers import BoundedJSONParser
from scheduling.limits import (
    MAX_CHECKPOINT_GB,
    MAX_CHECKPOINT_INTERVAL_S,
    MAX_DURATION_S,
    MAX_GANG_GPUS,
    MAX_TIME_LIMIT_S,
    MIN_CHECKPOINT_INTERVAL_S,
)
from scheduling.live.waits import NEW_JOB_REASON, JobWait, job_waits_for
from scheduling.models import IDEMPOTENCY_KEY_MAX_LENGTH, Job, JobKind, Level
from scheduling.selectors import job_for_user, jobs_for_user
from scheduling.services.jobs import IdempotencyKeyReused, JobSpec, job_cancel, job_submit_idempotent
from tenants.models import Team
from tenants.selectors import teams_for_user

logger = logging.getLogger(__name__)

LIST_LIMIT = 200
IDEMPOTENCY_HEADER = "Idempotency-Key"
# What replaces these routes: the jobs resource of API v1.
SUCCESSOR_URL = "/api/v1/jobs/"
# How long a client should wait before retrying while the database or Redis is unreachable.
RETRY_AFTER_S = 5
# What the API cannot work without: the database (jobs) and Redis (pending reasons).
DEPENDENCY_ERRORS: tuple[type[Exception], ...] = (OperationalError, InterfaceError, redis.RedisError)


class JobOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    team = serializers.CharField(source="team.slug")
    kind = serializers.CharField()
    priority_class = serializers.CharField(source="priority_class.name")
    accelerator_type = serializers.CharField(source="accelerator_type.name")
    gpus = serializers.IntegerField()
    state = serializers.CharField()
    duration_s = serializers.FloatField()
    time_limit_s = serializers.FloatField(allow_null=True)
    submit_s = serializers.FloatField()
    started_s = serializers.FloatField(allow_null=True)
    finished_s = serializers.FloatField(allow_null=True)
    placement_level = serializers.CharField()
    borrowing = serializers.BooleanField()
    restarts = serializers.IntegerField()
    checkpoint_on_preempt = serializers.BooleanField()
    pending_reason = serializers.SerializerMethodField()
    estimated_start_s = serializers.SerializerMethodField()

    def _pending(self, job: Job) -> Any:
        return self.context.get("pending", {}).get(job.pk)

    def get_pending_reason(self, job: Job) -> str | None:
        info = self._pending(job)
        return info.reason if info else None

    def get_estimated_start_s(self, job: Job) -> float | None:
        info = self._pending(job)
        return info.estimated_start_s if info else None


def _pending_info(jobs: list[Job]) -> dict[int, JobWait]:
    """Pending reasons live in Redis: without it the jobs are still listed, with no reason."""
    try:
        return job_waits_for(job_ids=[job.pk for job in jobs if job.state == Job.State.PENDING])
    except redis.RedisError:
        logger.warning("Redis is unreachable: jobs listed without pending reasons", exc_info=True)
        return {}


def _output(jobs: list[Job], pending: dict[int, JobWait] | None = None) -> list[dict[str, Any]]:
    pending = _pending_info(jobs) if pending is None else pending
    # many=True makes a list serializer, whose data is a list; the stubs type it as one object's.
    return JobOutput(jobs, many=True, context={"pending": pending}).data  # type: ignore[return-value]


class JobApiView(APIView):
    """Job API views: JSON bodies with a nesting limit, and 503 while a dependency is down."""

    parser_classes = [BoundedJSONParser, FormParser, MultiPartParser]

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, DEPENDENCY_ERRORS):
            logger.warning("%s %s: a dependency is unreachable", self.request.method, self.request.path, exc_info=exc)
            return Response(
                {"detail": f"Briefly unavailable: retry in {RETRY_AFTER_S} s, with the same {IDEMPOTENCY_HEADER}."},
                status=status.HTTP_503_SERVICE_UNAVAILABLE,
                headers={"Retry-After": str(RETRY_AFTER_S)},
            )
        return super().handle_exception(exc)

    def finalize_response(self, request: Request, response: Response, *args: Any, **kwargs: Any) -> Response:
        # These routes keep answering while clients move to /api/v1/; every answer says so
        # (the Deprecation header, RFC 9745, and the successor's link, RFC 8594).
        response = super().finalize_response(request, response, *args, **kwargs)
        response["Deprecation"] = "true"
        response["Link"] = f'<{SUCCESSOR_URL}>; rel="successor-version"'
        return response


def _idempotency_key(request: Request) -> str:
    key = request.headers.get(IDEMPOTENCY_HEADER, "")
    if len(key) > IDEMPOTENCY_KEY_MAX_LENGTH or not all(" " <= char <= "~" for char in key):
        raise ValidationError(
            {
                "idempotency_key": [
                    f"{IDEMPOTENCY_HEADER} must be at most {IDEMPOTENCY_KEY_MAX_LENGTH} printable ASCII characters."
                ]
            }
        )
    return key.strip()


def member_team(*, user_id: int, slug: str) -> QuerySet[Team, dict[str, Any]]:
    """The team ``slug`` if the user is among its members."""
    return Team.objects.filter(slug=slug, memberships__user_id=user_id).values(*attnames(Team))[:1]


# Every submission runs it: its SQL is built once (`CompiledQuery`), not on each request.
MEMBER_TEAM = CompiledQuery(member_team, user_id=int, slug=str)


def _submission_team(*, user: Any, slug: str) -> Team | None:
    """The team ``slug`` among the user's (``teams_for_user``): a member's own team in one query;
    the full rule, where fleet admins may use any team, only when that finds none."""
    row = MEMBER_TEAM.first(user_id=user.pk, slug=slug)
    if row is not None:
        return cast(Team, instance_from(Team, row))
    return teams_for_user(user=user).filter(slug=slug).first()


class JobSubmitApi(JobApiView):
    class Input(serializers.Serializer):
        team = serializers.SlugField()
        name = serializers.CharField(max_length=200)
        kind = serializers.ChoiceField(choices=JobKind.choices, default=JobKind.TRAINING)
        priority_class = serializers.IntegerField()
        accelerator_type = serializers.IntegerField()
        gpus = serializers.IntegerField(min_value=1, max_value=MAX_GANG_GPUS)
        duration_s = serializers.FloatField(min_value=1, max_value=MAX_DURATION_S)
        time_limit_s = serializers.FloatField(min_value=1, max_value=MAX_TIME_LIMIT_S, required=False, allow_null=True)
        min_gpus = serializers.IntegerField(min_value=1, max_value=MAX_GANG_GPUS, required=False, allow_null=True)
        max_gpus = serializers.IntegerField(min_value=1, max_value=MAX_GANG_GPUS, required=False, allow_null=True)
        checkpoint_interval_s = serializers.FloatField(
            min_value=MIN_CHECKPOINT_INTERVAL_S, max_value=MAX_CHECKPOINT_INTERVAL_S, required=False, allow_null=True
        )
        checkpoint_gb = serializers.FloatField(min_value=0, max_value=MAX_CHECKPOINT_GB, default=0.0)
        checkpoint_on_preempt = serializers.BooleanField(default=False)
        required_level = serializers.ChoiceField(choices=Level.choices, required=False, default="")
        preferred_level = serializers.ChoiceField(choices=Level.choices, required=False, default="")

    def post(self, request: Request) -> Response:
        key = _idempotency_key(request)
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        team = _submission_team(user=request.user, slug=values.pop("team"))
        if team is None:
            raise ValidationError({"team": ["No such team among yours."]})
        values["priority_class_id"] = values.pop("priority_class")
        values["accelerator_type_id"] = values.pop("accelerator_type")
        try:
            submission = job_submit_idempotent(
                team=team, spec=JobSpec(**values), user=signed_in_user(request), idempotency_key=key
            )
        except DjangoValidationError as error:
            raise ValidationError(error.message_dict) from error
        except IdempotencyKeyReused as error:
            return Response(
                {"idempotency_key": [f"{error} Use a new key for a new job."]},
                status=status.HTTP_422_UNPROCESSABLE_ENTITY,
            )
        if submission.created:
            # A job made just now has had no cycle yet: its reason is known without asking Redis.
            body = _output([submission.job], pending={submission.job.pk: JobWait(NEW_JOB_REASON, None)})[0]
            return Response(body, status=status.HTTP_201_CREATED)
        # A retry: the job the first attempt made, as it is now, with the first answer's status.
        return Response(
            _output([submission.job])[0], status=status.HTTP_201_CREATED, headers={"Idempotent-Replayed": "true"}
        )


class JobListApi(JobApiView):
    def get(self, request: Request) -> Response:
        states = tuple(s for s in request.query_params.getlist("state") if s in Job.State.values) or None
        jobs = list(jobs_for_user(user=request.user, states=states).order_by("-id")[:LIST_LIMIT])
        return Response(_output(jobs))


class JobDetailApi(JobApiView):
    def get(self, request: Request, job_id: int) -> Response:
        return Response(_output([job_for_user(user=request.user, job_id=job_id)])[0])


class JobCancelApi(JobApiView):
    def post(self, request: Request, job_id: int) -> Response:
        job = job_for_user(user=request.user, job_id=job_id)
        if not job_cancel(job=job, user=signed_in_user(request)):
            raise ValidationError({"state": [f"Job {job.pk} has already ended."]})
        job.refresh_from_db()
        return Response(_output([job])[0])
