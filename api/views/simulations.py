"""``/api/v1/simulations/``: start a what-if replay (a trace file as multipart, or the fleet's own
last N days as JSON), follow its progress, cancel it, read its results beside the current policy."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.urls import reverse
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from api.errors import Conflict, ErrorResponse409Serializer
from api.fields import StrictFloatField
from api.views.base import ID_LOOKUP, ApiViewSet
from scheduling.sim.runner import PRESETS
from scheduling.sim.trace import FORMATS
from simulations.inputs import upload_size_check
from simulations.models import Simulation
from simulations.selectors import LIST_FIELDS, simulation_for_user, simulations_for_user
from simulations.services import SimulationRequest, simulation_cancel, simulation_start
from tenants.models import Team


class SimulationInput(serializers.Serializer):
    # A declared field, not Field.source: DRF takes declared fields off the class.
    source = serializers.ChoiceField(choices=Simulation.Source.choices)  # type: ignore[assignment]
    team = serializers.SlugField(
        required=False, allow_blank=True, help_text="A team you lead; fleet admins may leave it out (whole fleet)."
    )
    preset = serializers.ChoiceField(choices=list(PRESETS), default="fleetline")
    trace = serializers.FileField(required=False, help_text="source=trace: the trace file (multipart).")
    trace_format = serializers.ChoiceField(choices=list(FORMATS), default="canonical")
    history_days = StrictFloatField(required=False, help_text="source=history: fleet days of jobs to replay.")
    policy_settings = serializers.JSONField(
        required=False,
        help_text='Overrides of the preset\'s policy, e.g. {"backfill": false, "reservation_depth": 2}; '
        "a JSON string in a multipart request.",
    )
    fleet_spec = serializers.CharField(required=False, allow_blank=True, max_length=100)
    seed = serializers.IntegerField(required=False, default=0, min_value=0, max_value=2**31 - 1)

    def validate_policy_settings(self, value: Any) -> dict[str, Any]:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as error:
                raise serializers.ValidationError(f"Not JSON: {error.msg}.") from None
        if not isinstance(value, dict):
            raise serializers.ValidationError("Expected an object of setting names and values.")
        return value


class SimulationOutput(serializers.ModelSerializer):
    team: serializers.SlugRelatedField[Team] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True
    )
    created_by: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    url = serializers.SerializerMethodField()

    class Meta:
        model = Simulation
        fields = ["url", *LIST_FIELDS]

    def get_url(self, simulation: Simulation) -> str:
        return reverse("simulations:detail", args=[simulation.pk])


class SimulationDetailOutput(SimulationOutput):
    results = serializers.JSONField(
        read_only=True,
        help_text='{"meta", "candidate", "current"}: the simulator\'s metrics for the replayed policy and the '
        "fleet's current one (every key of the metrics contract).",
    )
    report_url = serializers.SerializerMethodField()

    class Meta(SimulationOutput.Meta):
        fields = [*SimulationOutput.Meta.fields, "results", "report_url"]

    def get_report_url(self, simulation: Simulation) -> str | None:
        if simulation.state != Simulation.State.SUCCEEDED:
            return None
        return reverse("simulations:report", args=[simulation.pk])


class SimulationViewSet(ApiViewSet):
    queryset = Simulation.objects.none()  # for the schema; requests use the selectors
    lookup_value_regex = ID_LOOKUP

    def get_queryset(self) -> Any:
        return simulations_for_user(user=self.request.user)

    @extend_schema(responses=SimulationOutput(many=True), summary="Replays you may see, newest first")
    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(SimulationOutput(page, many=True).data)

    @extend_schema(responses=SimulationDetailOutput, summary="One replay: progress, and results when it succeeded")
    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(SimulationDetailOutput(simulation_for_user(user=request.user, simulation_id=int(pk))).data)

    @extend_schema(
        request={"multipart/form-data": SimulationInput, "application/json": SimulationInput},
        responses={201: SimulationOutput},
        examples=[
            OpenApiExample(
                "Replay the last day of the fleet's jobs",
                request_only=True,
                media_type="application/json",
                value={"source": "history", "team": "language-models", "preset": "fleetline", "history_days": 1.0},
            )
        ],
        summary="Start a replay (fleet admins; a team's leads for their team)",
    )
    def create(self, request: Request) -> Response:
        upload_size_check(content_length=request.META.get("CONTENT_LENGTH"))
        data = SimulationInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        team = None
        if values.get("team"):
            team = Team.objects.filter(slug=values["team"]).first()
            if team is None:
                raise ValidationError({"team": ["No such team."]})
        upload = values.get("trace")
        simulation = simulation_start(
            user=request.user,
            request=SimulationRequest(
                source=values["source"],
                preset=values["preset"],
                team=team,
                trace_name=upload.name if upload else "",
                trace_data=upload.read(settings.SIMULATION_MAX_TRACE_BYTES + 1) if upload else None,
                trace_format=values["trace_format"],
                history_days=values.get("history_days"),
                policy_settings=values.get("policy_settings") or {},
                fleet_spec=values.get("fleet_spec") or "",
                seed=values["seed"],
            ),
        )
        headers = {"Location": f"{request.path}{simulation.pk}/"}
        return Response(SimulationOutput(simulation).data, status=201, headers=headers)

    @extend_schema(
        request=None,
        responses={200: SimulationOutput, 409: ErrorResponse409Serializer},
        summary="Cancel a queued or running replay",
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        simulation = simulation_for_user(user=request.user, simulation_id=int(pk))
        if simulation.finished:
            raise Conflict(f"Replay {simulation.pk} has already ended ({simulation.state}).")
        return Response(SimulationOutput(simulation_cancel(simulation=simulation)).data)
