"""Jobs: submit by names, list with filters, detail with the pending reason and estimated start,
cancel, and the job's events."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, cast

import redis
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet, Value
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from api.errors import Conflict, ErrorResponse409Serializer, validation_error_from_django
from api.fields import StrictFloatField
from api.lean_input import LeanInput
from api.throttling import ApiSubmitThrottle
from api.views.base import ID_LOOKUP, ApiViewSet
from core.auth import signed_in_user
from core.compiled_queries import CompiledQuery, attnames, instance_from
from scheduling.estimates import EstimateView, estimate_views_for
from scheduling.filters import JobFilter
from scheduling.limits import MAX_COMMAND_CHARS
from scheduling.listed import ListedJob, listed_by_id, listed_from
from scheduling.live.explanations import wait_text
from scheduling.live.waits import NEW_JOB_REASON, JobWait, job_waits_for
from scheduling.models import IDEMPOTENCY_KEY_MAX_LENGTH, AcceleratorType, Job, JobKind, Level, SchedulerEvent
from scheduling.selectors import job_events, job_for_user, job_nodes, jobs_for_user
from scheduling.services.jobs import (
    IdempotencyKeyReused,
    JobSpec,
    NamesChanged,
    Submission,
    job_cancel,
    job_submit_idempotent,
)
from tenants.models import PriorityClass, Team
from tenants.selectors import teams_for_user

logger = logging.getLogger(__name__)

LEVEL_CHOICES = [("", "any"), *Level.choices]
IDEMPOTENCY_HEADER = "Idempotency-Key"

# The service's error keys -> the fields of this API.
FIELD_FOR_ERROR = {
    "duration": "duration_s",
    "time_limit": "time_limit_s",
    "checkpoint_interval": "checkpoint_interval_s",
    "accelerator_type": "accelerator",
}


class PendingOutput(serializers.Serializer):
    reason = serializers.CharField(help_text="Why the job waits, as the latest scheduling cycle saw it.")
    explanation = serializers.CharField(
        help_text="The one thing that holds it, in words: which limit and how many GPUs short, the job ahead, "
        "the node, rack or pod it waits for (as its page says it)."
    )
    estimated_start_s = serializers.FloatField(
        allow_null=True, help_text="Fleet-clock second at which it should start; null when unknown."
    )
    waits_for = serializers.CharField(allow_null=True, help_text="What it waits for when no estimate is believable.")
    likely_start_from_s = serializers.FloatField(
        allow_null=True,
        help_text="Fleet-clock second from which it is likely to start: the estimate's range, calibrated on how "
        "the first estimates of the latest jobs that started turned out. Null without an estimate.",
    )
    likely_start_until_s = serializers.FloatField(
        allow_null=True, help_text="Fleet-clock second by which it is likely to have started. Null without an estimate."
    )
    likely_share = serializers.FloatField(
        allow_null=True, help_text="The share of starts such a range is calibrated to hold (0.8: 8 in 10)."
    )


class FirstEstimateOutput(serializers.Serializer):
    shown_s = serializers.FloatField(
        source="first_estimate_at_s", help_text="Fleet-clock second of the first cycle that left the job waiting."
    )
    estimated_start_s = serializers.FloatField(
        source="first_estimate_s", allow_null=True, help_text="The start that cycle gave; null when it gave none."
    )
    likely_start_from_s = serializers.FloatField(
        source="first_estimate_low_s", allow_null=True, help_text="The range shown with it: from ..."
    )
    likely_start_until_s = serializers.FloatField(
        source="first_estimate_high_s", allow_null=True, help_text="... until this fleet-clock second."
    )


# The one field whose output format is DRF's (ISO 8601 in the current time zone, "Z" for UTC).
_CREATED_AT = serializers.DateTimeField()


class JobOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    team = serializers.CharField(source="team.slug")
    submitted_by = serializers.SerializerMethodField()
    kind = serializers.ChoiceField(choices=JobKind.choices)
    priority_class = serializers.CharField(source="priority_class.name")
    accelerator = serializers.CharField(source="accelerator_type.name")
    gpus = serializers.IntegerField()
    min_gpus = serializers.IntegerField(allow_null=True)
    max_gpus = serializers.IntegerField(allow_null=True)
    state = serializers.ChoiceField(choices=Job.State.choices)
    duration_s = serializers.FloatField()
    time_limit_s = serializers.FloatField(allow_null=True)
    checkpoint_interval_s = serializers.FloatField(allow_null=True)
    checkpoint_gb = serializers.FloatField()
    checkpoint_on_preempt = serializers.BooleanField()
    required_level = serializers.CharField(allow_blank=True)
    preferred_level = serializers.CharField(allow_blank=True)
    submit_s = serializers.FloatField(help_text="Fleet-clock second of submission.")
    started_s = serializers.FloatField(allow_null=True)
    finished_s = serializers.FloatField(allow_null=True)
    placement_level = serializers.CharField(allow_blank=True)
    borrowing = serializers.BooleanField()
    restarts = serializers.IntegerField()
    command = serializers.CharField(allow_blank=True, help_text="What the job runs on a real backend.")
    cluster_account = serializers.CharField(allow_blank=True, help_text="The cluster account it runs as.")
    exit_code = serializers.IntegerField(allow_null=True, help_text="Its command's exit code, once it ended.")
    created_at = serializers.DateTimeField()
    first_estimate = serializers.SerializerMethodField()
    pending = serializers.SerializerMethodField()

    def to_representation(self, instance: Job | ListedJob) -> dict[str, Any]:
        """What the declared fields give (``tests/api/test_job_output.py`` holds the two to one
        answer), read straight off the row: DRF's walk over 27 field objects cost more CPU than
        the rest of a job's detail request. The list reads its rows lean (`ListedJob`)."""
        job = instance if isinstance(instance, ListedJob) else listed_from(instance)
        return {
            "id": job.pk,
            "name": job.name,
            "team": job.team_slug,
            "submitted_by": job.submitted_by_username,
            "kind": job.kind,
            "priority_class": job.priority_class_name,
            "accelerator": job.accelerator_name,
            "gpus": job.gpus,
            "min_gpus": job.min_gpus,
            "max_gpus": job.max_gpus,
            "state": job.state,
            "duration_s": job.duration_s,
            "time_limit_s": job.time_limit_s,
            "checkpoint_interval_s": job.checkpoint_interval_s,
            "checkpoint_gb": job.checkpoint_gb,
            "checkpoint_on_preempt": job.checkpoint_on_preempt,
            "required_level": job.required_level,
            "preferred_level": job.preferred_level,
            "submit_s": job.submit_s,
            "started_s": job.started_s,
            "finished_s": job.finished_s,
            "placement_level": job.placement_level,
            "borrowing": job.borrowing,
            "restarts": job.restarts,
            "command": job.command,
            "cluster_account": job.cluster_account,
            "exit_code": job.exit_code,
            "created_at": _CREATED_AT.to_representation(job.created_at),
            "first_estimate": self.get_first_estimate(job),
            "pending": self.get_pending(job),
        }

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_submitted_by(self, job: Job) -> str | None:
        return job.submitted_by.get_username() if job.submitted_by_id and job.submitted_by else None

    @extend_schema_field(FirstEstimateOutput(allow_null=True))
    def get_first_estimate(self, job: Job | ListedJob) -> dict[str, Any] | None:
        """What the job was first told when it waited, for seeing how far its estimate moved."""
        if job.first_estimate_at_s is None:
            return None
        return {
            "shown_s": job.first_estimate_at_s,
            "estimated_start_s": job.first_estimate_s,
            "likely_start_from_s": job.first_estimate_low_s,
            "likely_start_until_s": job.first_estimate_high_s,
        }

    @extend_schema_field(PendingOutput(allow_null=True))
    def get_pending(self, job: Job | ListedJob) -> dict[str, Any] | None:
        info: JobWait | None = self.context.get("pending", {}).get(job.pk)
        if job.state != Job.State.PENDING or info is None:
            return None
        likely: EstimateView | None = self.context.get("estimates", {}).get(job.pk)
        return {
            "reason": info.reason,
            "explanation": wait_text(info),
            "estimated_start_s": info.estimated_start_s,
            "waits_for": info.waits_for,
            "likely_start_from_s": None if likely is None else likely.likely.low_s,
            "likely_start_until_s": None if likely is None else likely.likely.high_s,
            "likely_share": None if likely is None else likely.coverage,
        }


class JobSubmitInput(serializers.Serializer):
    """Types only: every bound and cross-field rule is the submission service's, the same as the
    form's (``scheduling.services.jobs``), so the API and the page cannot disagree."""

    team = serializers.SlugField(help_text="Team slug, one of yours.")
    name = serializers.CharField(max_length=200)
    kind = serializers.ChoiceField(choices=JobKind.choices, default=JobKind.TRAINING)
    priority_class = serializers.CharField(
        max_length=50, help_text="Priority class name (GET /api/v1/priority-classes/)."
    )
    accelerator = serializers.CharField(max_length=50, help_text="Accelerator type name (GET /api/v1/accelerators/).")
    gpus = serializers.IntegerField(help_text="Gang size.")
    duration_s = StrictFloatField(
        required=False,
        allow_null=True,
        help_text="Work at full size, in seconds. On a real backend, optional: the time limit stands in for it.",
    )
    time_limit_s = StrictFloatField(required=False, allow_null=True)
    min_gpus = serializers.IntegerField(required=False, allow_null=True)
    max_gpus = serializers.IntegerField(required=False, allow_null=True)
    checkpoint_interval_s = StrictFloatField(required=False, allow_null=True)
    checkpoint_gb = StrictFloatField(default=0.0)
    checkpoint_on_preempt = serializers.BooleanField(
        default=False, help_text="The job checkpoints when told it is preempted, within the grace period."
    )
    required_level = serializers.ChoiceField(choices=LEVEL_CHOICES, required=False, default="")
    preferred_level = serializers.ChoiceField(choices=LEVEL_CHOICES, required=False, default="")
    command = serializers.CharField(
        required=False,
        default="",
        allow_blank=True,
        trim_whitespace=False,
        max_length=MAX_COMMAND_CHARS,
        help_text="On a real backend: the command line or batch script bash runs on every node of the gang, "
        "as your cluster account.",
    )


# Well-formed submission bodies are validated without making the serializer (`LeanInput`).
SUBMIT_INPUT = LeanInput(JobSubmitInput)


class EventOutput(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=SchedulerEvent.Kind.choices)
    sim_time_s = serializers.FloatField(help_text="Fleet-clock second.")
    message = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()


class JobDetailOutput(JobOutput):
    nodes = serializers.SerializerMethodField()

    def to_representation(self, instance: Job | ListedJob) -> dict[str, Any]:
        return {**super().to_representation(instance), "nodes": self.get_nodes(instance)}

    @extend_schema_field(
        serializers.ListField(child=serializers.DictField(), help_text='[{"node": name, "gpus": n}, ...]')
    )
    def get_nodes(self, job: Job | ListedJob) -> list[dict[str, Any]]:
        return [{"node": name, "gpus": gpus} for name, gpus in job_nodes(job=job)]


def pending_for(jobs: Sequence[Job | ListedJob]) -> dict[int, JobWait]:
    """Pending reasons live in Redis: without it the jobs are still listed, with no reason."""
    try:
        return job_waits_for(job_ids=[job.pk for job in jobs if job.state == Job.State.PENDING])
    except redis.RedisError:
        logger.warning("Redis is unreachable: jobs listed without pending reasons", exc_info=True)
        return {}


def estimates_for(jobs: Sequence[Job | ListedJob], waits: dict[int, JobWait]) -> dict[int, EstimateView]:
    """The likely range of each estimate: without Redis, none (the estimates are listed alone)."""
    try:
        return estimate_views_for(jobs=jobs, waits=waits)
    except redis.RedisError:
        logger.warning("Redis is unreachable: estimates listed without their ranges", exc_info=True)
        return {}


def _idempotency_key(request: Request) -> str:
    """The header's key, or "" when there is no header. A header that is there but blank is
    refused: taken for no key, a retry would make a second job."""
    key = request.headers.get(IDEMPOTENCY_HEADER)
    if key is None:
        return ""
    if not key.strip() or len(key) > IDEMPOTENCY_KEY_MAX_LENGTH or not all(" " <= char <= "~" for char in key):
        raise ValidationError(
            {
                "idempotency_key": [
                    f"{IDEMPOTENCY_HEADER} must be 1 to {IDEMPOTENCY_KEY_MAX_LENGTH} printable ASCII characters, "
                    "not only spaces."
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


# Priority class and accelerator type ids by name, as last resolved in this process. A cached id
# is only a guess: the submission service reads both rows anyway and refuses (NamesChanged, before
# writing) when either no longer has the name, and the names are then resolved afresh.
_IDS_BY_NAME: dict[tuple[str, str], int] = {}


def _ids_by_name(values: dict[str, Any]) -> dict[str, int]:
    """The two names resolved to ids in one query; an unknown name is a field error."""
    ids = dict(
        # Without the models' default ordering: SQLite refuses ORDER BY inside a UNION's parts.
        PriorityClass.objects.filter(name=values["priority_class"])
        .order_by()
        .values_list(Value("priority_class"), "pk")
        .union(
            AcceleratorType.objects.filter(name=values["accelerator"])
            .order_by()
            .values_list(Value("accelerator"), "pk")
        )
    )
    errors = {}
    if "priority_class" not in ids:
        errors["priority_class"] = [f"No priority class named {values['priority_class']!r}."]
    if "accelerator" not in ids:
        errors["accelerator"] = [f"No accelerator type named {values['accelerator']!r}."]
    if errors:
        raise ValidationError(errors)
    for field in ("priority_class", "accelerator"):
        _IDS_BY_NAME[(field, values[field])] = ids[field]
    return ids


def _spec(values: dict[str, Any], ids: dict[str, int]) -> JobSpec:
    fields = {key: value for key, value in values.items() if key not in ("team", "priority_class", "accelerator")}
    if fields.get("duration_s") is None:
        # A real job's work is not known ahead: its time limit is the estimate the engine plans with.
        # Without either, the service's bounds refuse the duration.
        fields["duration_s"] = fields.get("time_limit_s") or 0.0
    return JobSpec(priority_class_id=ids["priority_class"], accelerator_type_id=ids["accelerator"], **fields)


def _submit(*, request: Request, team: Team, values: dict[str, Any], key: str) -> Submission:
    """Submit with the names' cached ids when both are known, else (or when they turn out stale)
    with ids resolved now."""
    fields = ("priority_class", "accelerator")
    cached = {field: _IDS_BY_NAME[(field, values[field])] for field in fields if (field, values[field]) in _IDS_BY_NAME}
    user = signed_in_user(request)
    if len(cached) == len(fields):
        names = (values["priority_class"], values["accelerator"])
        try:
            spec = _spec(values, cached)
            return job_submit_idempotent(team=team, spec=spec, user=user, idempotency_key=key, names=names)
        except NamesChanged:
            for field in cached:
                _IDS_BY_NAME.pop((field, values[field]), None)
    return job_submit_idempotent(team=team, spec=_spec(values, _ids_by_name(values)), user=user, idempotency_key=key)


class JobViewSet(ApiViewSet):
    lookup_value_regex = ID_LOOKUP
    filterset_class = JobFilter

    def get_queryset(self) -> QuerySet[Job]:
        return jobs_for_user(user=self.request.user).select_related("submitted_by")

    def get_throttles(self) -> list[Any]:
        if self.action == "create":
            # Submissions count against their own budget only: one Redis round trip pair, not two.
            return [ApiSubmitThrottle()]
        return super().get_throttles()

    def _render(
        self, jobs: Sequence[Job | ListedJob], *, output: type[JobOutput] = JobOutput, pending: Any = None
    ) -> Any:
        waits = pending_for(jobs) if pending is None else pending
        context = {"pending": waits, "estimates": estimates_for(jobs, waits)}
        return output(jobs, many=True, context=context).data

    @extend_schema(responses=JobOutput(many=True), summary="Jobs you may see, newest first")
    def list(self, request: Request) -> Response:
        # Lean: the page's ids, then its rows with their related names joined (`scheduling.listed`).
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()).values("id"))
        return self.get_paginated_response(self._render(listed_by_id([row["id"] for row in page or []])))

    @extend_schema(responses=JobDetailOutput, summary="One job, with its pending reason and placement")
    def retrieve(self, request: Request, pk: str) -> Response:
        job = job_for_user(user=request.user, job_id=int(pk))
        return Response(self._render([job], output=JobDetailOutput)[0])

    @extend_schema(
        request=JobSubmitInput,
        responses={201: JobOutput},
        examples=[
            OpenApiExample(
                "An 8-GPU training job",
                request_only=True,
                value={
                    "team": "language-models",
                    "name": "llm-finetune",
                    "kind": "training",
                    "priority_class": "training",
                    "accelerator": "H100",
                    "gpus": 8,
                    "duration_s": 3600.0,
                    "time_limit_s": 7200.0,
                    "checkpoint_interval_s": 600.0,
                },
            )
        ],
        parameters=[
            OpenApiParameter(
                IDEMPOTENCY_HEADER,
                location=OpenApiParameter.HEADER,
                required=False,
                description="A retry with the same key gets the job the first attempt made, never a second one.",
            )
        ],
        summary="Submit a job",
    )
    def create(self, request: Request) -> Response:
        key = _idempotency_key(request)
        values = SUBMIT_INPUT.validated(request.data)
        if values is None:  # anything but a well-formed JSON body: DRF's answer, and its messages
            data = JobSubmitInput(data=request.data)
            data.is_valid(raise_exception=True)
            values = dict(data.validated_data)
        team = _submission_team(user=request.user, slug=values["team"])
        if team is None:
            raise ValidationError({"team": ["No such team among yours."]})
        try:
            submission = _submit(request=request, team=team, values=values, key=key)
        except DjangoValidationError as error:
            raise validation_error_from_django(error, fields=FIELD_FOR_ERROR) from error
        except IdempotencyKeyReused as error:
            raise ValidationError({"idempotency_key": [f"{error} Use a new key for a new job."]}) from error
        headers = {"Location": f"{request.path}{submission.job.pk}/"}
        if submission.created:
            # A job made just now has had no cycle yet: its reason is known without asking Redis.
            pending = {submission.job.pk: JobWait(NEW_JOB_REASON, None)}
            return Response(self._render([submission.job], pending=pending)[0], status=201, headers=headers)
        headers["Idempotent-Replayed"] = "true"
        return Response(self._render([submission.job])[0], status=status.HTTP_201_CREATED, headers=headers)

    @extend_schema(
        request=None,
        responses={200: JobOutput, 409: ErrorResponse409Serializer},
        summary="Cancel a pending or running job",
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        job = job_for_user(user=request.user, job_id=int(pk))
        if not job_cancel(job=job, user=signed_in_user(request)):
            raise Conflict(f"Job {job.pk} has already ended.")
        job.refresh_from_db()
        return Response(self._render([job])[0])

    @extend_schema(responses=EventOutput(many=True), summary="The job's history, newest first (at most 200)")
    @action(detail=True, methods=["get"], pagination_class=None)
    def events(self, request: Request, pk: str) -> Response:
        job = job_for_user(user=request.user, job_id=int(pk))
        return Response(EventOutput(job_events(job=job), many=True).data)
