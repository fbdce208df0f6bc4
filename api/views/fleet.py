"""The fleet: pods -> racks -> nodes with state and occupancy, accelerator types, the admin's
cordon / uncordon / drain, and incidents."""

from __future__ import annotations

import django_filters
from django.conf import settings
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from api.views.base import ID_LOOKUP, ApiView, ApiViewSet, require_fleet_admin
from scheduling.models import AcceleratorType, Incident, Node
from scheduling.selectors import fleet_map, fleet_summary
from scheduling.services.jobs import fleet_now_s
from scheduling.services.nodes import node_action


class NodeOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    accelerator = serializers.CharField()
    gpus = serializers.IntegerField()
    healthy_gpus = serializers.IntegerField()
    allocated_gpus = serializers.IntegerField()
    state = serializers.ChoiceField(choices=Node.State.choices)
    jobs = serializers.ListField(
        child=serializers.CharField(),
        help_text="Jobs on the node: your teams' by name (every name for fleet admins), others as "
        '"another team\'s job"; each with its GPUs in brackets.',
    )


class RackOutput(serializers.Serializer):
    name = serializers.CharField()
    nodes = NodeOutput(many=True)


class PodOutput(serializers.Serializer):
    name = serializers.CharField()
    racks = RackOutput(many=True)


class FleetOutput(serializers.Serializer):
    now_s = serializers.FloatField(help_text="The fleet clock, in fleet seconds.")
    pods_count = serializers.IntegerField()
    racks_count = serializers.IntegerField()
    nodes_count = serializers.IntegerField()
    nodes_up = serializers.IntegerField()
    gpus = serializers.IntegerField()
    healthy_gpus = serializers.IntegerField()
    pods = PodOutput(many=True)


class FleetView(ApiView):
    @extend_schema(responses=FleetOutput, summary="The whole fleet with each node's state and occupancy")
    def get(self, request: Request) -> Response:
        summary = fleet_summary()
        body = {
            "now_s": fleet_now_s(),
            "pods_count": summary.pods,
            "racks_count": summary.racks,
            "nodes_count": summary.nodes,
            "nodes_up": summary.nodes_up,
            "gpus": summary.gpus,
            "healthy_gpus": summary.healthy_gpus,
            "pods": fleet_map(user=request.user),
        }
        return Response(FleetOutput(body).data)


class ClockOutput(serializers.Serializer):
    now_s = serializers.FloatField(help_text="The fleet clock, in fleet seconds: what every *_s time is measured on.")
    speed = serializers.FloatField(help_text="Fleet seconds per wall second.")


class ClockView(ApiView):
    @extend_schema(responses=ClockOutput, summary="The fleet clock")
    def get(self, request: Request) -> Response:
        return Response(ClockOutput({"now_s": fleet_now_s(), "speed": settings.FLEET_CLOCK_SPEED}).data)


class NodeFlatOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    pod = serializers.CharField(source="rack.pod.name")
    rack = serializers.CharField(source="rack.name")
    accelerator = serializers.CharField(source="accelerator_type.name")
    gpus = serializers.IntegerField()
    healthy_gpus = serializers.IntegerField()
    allocated_gpus = serializers.IntegerField()
    state = serializers.ChoiceField(choices=Node.State.choices)
    last_heartbeat = serializers.DateTimeField(allow_null=True)


class NodeFilter(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(choices=Node.State.choices)
    accelerator = django_filters.CharFilter(field_name="accelerator_type__name")
    rack = django_filters.CharFilter(field_name="rack__name")
    pod = django_filters.CharFilter(field_name="rack__pod__name")

    class Meta:
        model = Node
        fields: list[str] = []


class NodeViewSet(ApiViewSet):
    """Nodes one by one; fleet admins cordon (no new work), uncordon, or drain (cordon, and every
    gang on the node goes back to its last checkpoint now). Audited."""

    lookup_field = "name"
    lookup_value_regex = r"[-a-zA-Z0-9_.]+"
    filterset_class = NodeFilter

    def get_queryset(self) -> QuerySet[Node]:
        return Node.objects.select_related("rack__pod", "accelerator_type")

    @extend_schema(responses=NodeFlatOutput(many=True))
    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(NodeFlatOutput(page, many=True).data)

    def _one(self, name: str) -> Node:
        node = self.get_queryset().filter(name=name).first()
        if node is None:
            raise NotFound("No such node.")
        return node

    @extend_schema(responses=NodeFlatOutput)
    def retrieve(self, request: Request, name: str) -> Response:
        return Response(NodeFlatOutput(self._one(name)).data)

    def _act(self, request: Request, name: str, verb: str) -> Response:
        node = self._one(name)
        require_fleet_admin(request, f"Only fleet admins {verb} nodes.")
        node_action(node=node, action=verb, actor=request.user, sim_now_s=fleet_now_s())
        return Response(NodeFlatOutput(self._one(name)).data)

    @extend_schema(request=None, responses=NodeFlatOutput, summary="Cordon: no new work (fleet admins)")
    @action(detail=True, methods=["post"])
    def cordon(self, request: Request, name: str) -> Response:
        return self._act(request, name, "cordon")

    @extend_schema(request=None, responses=NodeFlatOutput, summary="Back in service (fleet admins)")
    @action(detail=True, methods=["post"])
    def uncordon(self, request: Request, name: str) -> Response:
        return self._act(request, name, "uncordon")

    @extend_schema(request=None, responses=NodeFlatOutput, summary="Cordon and send its gangs away (fleet admins)")
    @action(detail=True, methods=["post"])
    def drain(self, request: Request, name: str) -> Response:
        return self._act(request, name, "drain")


class AcceleratorOutput(serializers.Serializer):
    name = serializers.CharField()
    memory_gb = serializers.IntegerField()


class AcceleratorListView(ApiView):
    queryset = AcceleratorType.objects.none()  # for the schema: names the model

    @extend_schema(responses=AcceleratorOutput(many=True), summary="Accelerator types, by name")
    def get(self, request: Request) -> Response:
        return Response(AcceleratorOutput(AcceleratorType.objects.order_by("name"), many=True).data)


class IncidentOutput(serializers.Serializer):
    id = serializers.IntegerField()
    node = serializers.CharField(source="node.name")
    kind = serializers.ChoiceField(choices=Incident.Kind.choices)
    gpus_lost = serializers.IntegerField()
    slowdown = serializers.FloatField()
    failed_at = serializers.FloatField(help_text="Fleet-clock second; so are the other times.")
    detected_at = serializers.FloatField(allow_null=True)
    replaced_at = serializers.FloatField(allow_null=True)
    restored_at = serializers.FloatField(allow_null=True)
    resumed_at = serializers.FloatField(allow_null=True)
    lost_gpu_s = serializers.FloatField()
    jobs_affected = serializers.SerializerMethodField(
        help_text="How many jobs the failure hit (a count, as on the incidents page: which jobs is each team's own)."
    )

    def get_jobs_affected(self, incident: Incident) -> int:
        return len(incident.jobs.all())


class IncidentFilter(django_filters.FilterSet):
    kind = django_filters.ChoiceFilter(choices=Incident.Kind.choices)
    node = django_filters.CharFilter(field_name="node__name")
    open = django_filters.BooleanFilter(field_name="resumed_at", lookup_expr="isnull", label="Not yet resumed")

    class Meta:
        model = Incident
        fields: list[str] = []


class IncidentViewSet(ApiViewSet):
    """Node failures and their recovery, newest first."""

    lookup_value_regex = ID_LOOKUP
    filterset_class = IncidentFilter

    def get_queryset(self) -> QuerySet[Incident]:
        return Incident.objects.select_related("node").prefetch_related("jobs")

    @extend_schema(responses=IncidentOutput(many=True))
    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(IncidentOutput(page, many=True).data)

    @extend_schema(responses=IncidentOutput)
    def retrieve(self, request: Request, pk: str) -> Response:
        incident = self.get_queryset().filter(pk=int(pk)).first()
        if incident is None:
            raise NotFound("No such incident.")
        return Response(IncidentOutput(incident).data)
