"""REST API for jobs: one view per operation, validate -> one service -> serialize."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from scheduling.models import Job, JobKind, Level
from scheduling.selectors import job_for_user, jobs_for_user
from scheduling.services.jobs import JobSpec, job_cancel, job_submit
from scheduling.services.pending import pending_info_for
from tenants.selectors import teams_for_user

LIST_LIMIT = 200


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


def _output(jobs: list[Job]) -> list[dict[str, Any]]:
    pending = pending_info_for(job_ids=[job.pk for job in jobs if job.state == Job.State.PENDING])
    return JobOutput(jobs, many=True, context={"pending": pending}).data


class JobSubmitApi(APIView):
    class Input(serializers.Serializer):
        team = serializers.SlugField()
        name = serializers.CharField(max_length=200)
        kind = serializers.ChoiceField(choices=JobKind.choices, default=JobKind.TRAINING)
        priority_class = serializers.IntegerField()
        accelerator_type = serializers.IntegerField()
        gpus = serializers.IntegerField(min_value=1)
        duration_s = serializers.FloatField(min_value=1)
        time_limit_s = serializers.FloatField(min_value=1, required=False, allow_null=True)
        min_gpus = serializers.IntegerField(min_value=1, required=False, allow_null=True)
        max_gpus = serializers.IntegerField(min_value=1, required=False, allow_null=True)
        checkpoint_interval_s = serializers.FloatField(min_value=1, required=False, allow_null=True)
        checkpoint_gb = serializers.FloatField(min_value=0, default=0.0)
        required_level = serializers.ChoiceField(choices=Level.choices, required=False, default="")
        preferred_level = serializers.ChoiceField(choices=Level.choices, required=False, default="")

    def post(self, request: Request) -> Response:
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        team = teams_for_user(user=request.user).filter(slug=values.pop("team")).first()
        if team is None:
            raise ValidationError({"team": ["No such team among yours."]})
        values["priority_class_id"] = values.pop("priority_class")
        values["accelerator_type_id"] = values.pop("accelerator_type")
        try:
            job = job_submit(team=team, spec=JobSpec(**values), user=request.user)
        except DjangoValidationError as error:
            raise ValidationError(error.message_dict) from error
        return Response(_output([job])[0], status=status.HTTP_201_CREATED)


class JobListApi(APIView):
    def get(self, request: Request) -> Response:
        states = tuple(s for s in request.query_params.getlist("state") if s in Job.State.values) or None
        jobs = list(jobs_for_user(user=request.user, states=states).order_by("-id")[:LIST_LIMIT])
        return Response(_output(jobs))


class JobDetailApi(APIView):
    def get(self, request: Request, job_id: int) -> Response:
        return Response(_output([job_for_user(user=request.user, job_id=job_id)])[0])


class JobCancelApi(APIView):
    def post(self, request: Request, job_id: int) -> Response:
        job = job_for_user(user=request.user, job_id=job_id)
        if not job_cancel(job=job, user=request.user):
            raise ValidationError({"state": [f"Job {job.pk} has already ended."]})
        job.refresh_from_db()
        return Response(_output([job])[0])
