"""Teams, their members and quotas; quota requests; priority classes and the fleet policy."""

from __future__ import annotations

from typing import Any

import django_filters
from django.contrib.auth import get_user_model
from django.db import models
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from drf_standardized_errors.openapi_serializers import ErrorResponse403Serializer
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from api.fields import StrictFloatField
from api.selectors import memberships_for_team, quota_request_for_user, quota_requests_for_user
from api.views.base import ID_LOOKUP, ApiView, ApiViewSet, require_fleet_admin
from core.auth import signed_in_user
from fleet.models import AcceleratorType
from scheduling.selectors import quota_overview_for_team
from tenants import policy_units
from tenants.models import FleetPolicy, Membership, PriorityClass, QuotaRequest, Team
from tenants.permissions import is_fleet_admin, team_role
from tenants.selectors import fleet_policy_get, team_for_user, teams_for_user
from tenants.services import (
    fleet_policy_update,
    membership_add,
    membership_remove,
    membership_role_change,
    priority_class_save,
    quota_request_approve,
    quota_request_reject,
    quota_request_submit,
    quota_request_withdraw,
    quota_set,
)
from tenants.services.policy import POLICY_FIELDS

# Teams ------------------------------------------------------------------------------------------


class TeamOutput(serializers.Serializer):
    slug = serializers.SlugField()
    name = serializers.CharField()
    department = serializers.CharField(source="department.name")
    fairshare_weight = serializers.FloatField()


class MemberOutput(serializers.Serializer):
    username = serializers.CharField(source="user.username")
    role = serializers.ChoiceField(choices=Membership.Role.choices)


class MemberInput(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    role = serializers.ChoiceField(choices=Membership.Role.choices, default=Membership.Role.MEMBER)


class MemberRoleInput(serializers.Serializer):
    role = serializers.ChoiceField(choices=Membership.Role.choices)


class QuotaOutput(serializers.Serializer):
    accelerator = serializers.CharField(source="accelerator_type")
    guaranteed = serializers.IntegerField()
    borrow_limit = serializers.IntegerField(allow_null=True, help_text="null: unlimited")
    lend_limit = serializers.IntegerField(allow_null=True, help_text="null: unlimited")
    fleet_gpus = serializers.IntegerField()
    in_use = serializers.IntegerField()
    borrowed = serializers.IntegerField()
    lent = serializers.IntegerField()


class QuotaSetInput(serializers.Serializer):
    guaranteed = serializers.IntegerField(min_value=0, max_value=2**31 - 1)
    borrow_limit = serializers.IntegerField(
        min_value=0, max_value=2**31 - 1, required=False, allow_null=True, default=None, help_text="null: unlimited"
    )
    lend_limit = serializers.IntegerField(
        min_value=0, max_value=2**31 - 1, required=False, allow_null=True, default=None, help_text="null: unlimited"
    )
    reason = serializers.CharField(max_length=2000, help_text="Why the quota changes: in the audit log and the notice.")


def _require_team_manager(request: Request, team: Team) -> None:
    """Refuse at once anyone who may change none of the team's memberships; the membership
    services decide the rest (a lead adds and removes members; only fleet admins touch leads
    and roles)."""
    if not (is_fleet_admin(request.user) or team_role(request.user, team) == Membership.Role.LEAD):
        raise PermissionDenied("Only fleet admins and the team's leads change its members.")


class TeamViewSet(ApiViewSet):
    """Teams you belong to (every team for fleet admins); others answer 404."""

    lookup_field = "slug"
    lookup_value_regex = r"[-a-zA-Z0-9_]+"
    pagination_class = None

    def get_queryset(self) -> QuerySet[Any]:
        return teams_for_user(user=self.request.user)

    @extend_schema(responses=TeamOutput(many=True))
    def list(self, request: Request) -> Response:
        return Response(TeamOutput(self.get_queryset(), many=True).data)

    @extend_schema(responses=TeamOutput)
    def retrieve(self, request: Request, slug: str) -> Response:
        return Response(TeamOutput(team_for_user(user=request.user, slug=slug)).data)

    @extend_schema(responses=QuotaOutput(many=True), summary="Quota and use per accelerator type")
    @action(detail=True, methods=["get"])
    def quotas(self, request: Request, slug: str) -> Response:
        team = team_for_user(user=request.user, slug=slug)
        return Response(QuotaOutput(quota_overview_for_team(team=team), many=True).data)

    @extend_schema(
        request=QuotaSetInput,
        responses={200: QuotaOutput, 403: ErrorResponse403Serializer},
        parameters=[OpenApiParameter("accelerator", str, OpenApiParameter.PATH, description="accelerator type name")],
        summary="Set the quota for one accelerator type (fleet admins)",
        description="Replaces the team's guarantee and limits at once, within fleet capacity × the policy's "
        "overcommit ratio (else 400, nothing changed). Audited; the team's leads are told; the scheduler "
        "reads it from its next tick.",
    )
    @action(detail=True, methods=["put"], url_path=r"quotas/(?P<accelerator>[-\w.]+)")
    def quota(self, request: Request, slug: str, accelerator: str) -> Response:
        team = team_for_user(user=request.user, slug=slug)
        require_fleet_admin(request, "Only fleet admins set quotas.")
        accelerator_type = AcceleratorType.objects.filter(name=accelerator).first()
        if accelerator_type is None:
            raise NotFound("No such accelerator type.")
        data = QuotaSetInput(data=request.data)
        data.is_valid(raise_exception=True)
        quota_set(admin=signed_in_user(request), team=team, accelerator_type=accelerator_type, **data.validated_data)
        row = next(row for row in quota_overview_for_team(team=team) if row.accelerator_type_id == accelerator_type.pk)
        return Response(QuotaOutput(row).data)

    @extend_schema(methods=["GET"], responses=MemberOutput(many=True), summary="The team's members")
    @extend_schema(
        methods=["POST"], request=MemberInput, responses={201: MemberOutput}, summary="Add a member (leads, admins)"
    )
    @action(detail=True, methods=["get", "post"])
    def members(self, request: Request, slug: str) -> Response:
        team = team_for_user(user=request.user, slug=slug)
        if request.method == "GET":
            return Response(MemberOutput(memberships_for_team(team=team), many=True).data)
        _require_team_manager(request, team)
        data = MemberInput(data=request.data)
        data.is_valid(raise_exception=True)
        user = get_user_model().objects.filter(username=data.validated_data["username"]).first()
        if user is None:
            raise ValidationError({"username": ["No such user."]})
        membership = membership_add(
            actor=signed_in_user(request), team=team, user=user, role=data.validated_data["role"]
        )
        return Response(MemberOutput(membership).data, status=status.HTTP_201_CREATED)

    def _membership(self, request: Request, slug: str, username: str) -> Membership:
        team = team_for_user(user=request.user, slug=slug)
        membership = memberships_for_team(team=team).filter(user__username=username).first()
        if membership is None:
            raise NotFound("No such member.")
        return membership

    @extend_schema(
        methods=["PATCH"], request=MemberRoleInput, responses=MemberOutput, summary="Change a role (fleet admins)"
    )
    @extend_schema(methods=["DELETE"], request=None, responses={204: None}, summary="Remove a member (leads, admins)")
    @action(detail=True, methods=["patch", "delete"], url_path=r"members/(?P<username>[\w.@+-]+)")
    def member(self, request: Request, slug: str, username: str) -> Response:
        membership = self._membership(request, slug, username)
        _require_team_manager(request, membership.team)
        if request.method == "DELETE":
            membership_remove(actor=signed_in_user(request), membership_id=membership.pk)
            return Response(status=status.HTTP_204_NO_CONTENT)
        data = MemberRoleInput(data=request.data)
        data.is_valid(raise_exception=True)
        membership = membership_role_change(
            actor=signed_in_user(request), membership_id=membership.pk, role=data.validated_data["role"]
        )
        return Response(MemberOutput(membership).data)


# Quota requests ---------------------------------------------------------------------------------


class QuotaRequestOutput(serializers.Serializer):
    id = serializers.IntegerField()
    team = serializers.CharField(source="team.slug")
    accelerator = serializers.CharField(source="accelerator_type.name")
    guaranteed = serializers.IntegerField()
    borrow_limit = serializers.IntegerField(allow_null=True)
    lend_limit = serializers.IntegerField(allow_null=True)
    justification = serializers.CharField()
    state = serializers.ChoiceField(choices=QuotaRequest.State.choices)
    requested_by = serializers.CharField(source="requested_by.username")
    decided_by = serializers.CharField(source="decided_by.username", allow_null=True, default=None)
    self_approved = serializers.BooleanField(help_text="Approved by its own requester, the fleet's one admin.")
    decision_note = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)


class QuotaRequestInput(serializers.Serializer):
    team = serializers.SlugField()
    accelerator = serializers.CharField(max_length=50)
    guaranteed = serializers.IntegerField(min_value=0, max_value=2**31 - 1)
    borrow_limit = serializers.IntegerField(min_value=0, max_value=2**31 - 1, required=False, allow_null=True)
    lend_limit = serializers.IntegerField(min_value=0, max_value=2**31 - 1, required=False, allow_null=True)
    justification = serializers.CharField(max_length=5000)


class DecisionInput(serializers.Serializer):
    note = serializers.CharField(required=False, allow_blank=True, default="", max_length=5000)


class QuotaRequestFilter(django_filters.FilterSet):
    state = django_filters.ChoiceFilter(choices=QuotaRequest.State.choices)
    team = django_filters.CharFilter(field_name="team__slug")

    class Meta:
        model = QuotaRequest
        fields: list[str] = []


class QuotaRequestViewSet(ApiViewSet):
    """Your teams' quota requests (every team's for fleet admins). Leads file and withdraw; fleet
    admins approve (applying the quota, within fleet capacity) or reject with a note."""

    lookup_value_regex = ID_LOOKUP
    filterset_class = QuotaRequestFilter

    def get_queryset(self) -> QuerySet[QuotaRequest]:
        return quota_requests_for_user(user=self.request.user)

    def _one(self, request: Request, pk: str) -> QuotaRequest:
        return quota_request_for_user(user=request.user, quota_request_id=int(pk))

    @extend_schema(responses=QuotaRequestOutput(many=True))
    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(QuotaRequestOutput(page, many=True).data)

    @extend_schema(responses=QuotaRequestOutput)
    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(QuotaRequestOutput(self._one(request, pk)).data)

    @extend_schema(
        request=QuotaRequestInput,
        responses={201: QuotaRequestOutput},
        summary="Request quota (leads)",
        examples=[
            OpenApiExample(
                "More H100 for a launch",
                request_only=True,
                value={
                    "team": "language-models",
                    "accelerator": "H100",
                    "guaranteed": 96,
                    "borrow_limit": 32,
                    "justification": "Pre-training run for the spring launch.",
                },
            )
        ],
    )
    def create(self, request: Request) -> Response:
        data = QuotaRequestInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        team = team_for_user(user=request.user, slug=values["team"])
        accelerator = AcceleratorType.objects.filter(name=values["accelerator"]).first()
        if accelerator is None:
            raise ValidationError({"accelerator": [f"No accelerator type named {values['accelerator']!r}."]})
        quota_request = quota_request_submit(
            user=signed_in_user(request),
            team=team,
            accelerator_type=accelerator,
            guaranteed=values["guaranteed"],
            borrow_limit=values.get("borrow_limit"),
            lend_limit=values.get("lend_limit"),
            justification=values["justification"],
        )
        return Response(QuotaRequestOutput(quota_request).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=QuotaRequestOutput, summary="Withdraw a pending request (leads)")
    @action(detail=True, methods=["post"])
    def withdraw(self, request: Request, pk: str) -> Response:
        one = self._one(request, pk)
        return Response(
            QuotaRequestOutput(quota_request_withdraw(user=signed_in_user(request), quota_request_id=one.pk)).data
        )

    @extend_schema(request=DecisionInput, responses=QuotaRequestOutput, summary="Approve and apply (fleet admins)")
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk: str) -> Response:
        one = self._one(request, pk)
        data = DecisionInput(data=request.data)
        data.is_valid(raise_exception=True)
        quota_request_approve(admin=signed_in_user(request), quota_request_id=one.pk, note=data.validated_data["note"])
        return Response(QuotaRequestOutput(self._one(request, pk)).data)

    @extend_schema(request=DecisionInput, responses=QuotaRequestOutput, summary="Reject with a note (fleet admins)")
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str) -> Response:
        one = self._one(request, pk)
        data = DecisionInput(data=request.data)
        data.is_valid(raise_exception=True)
        decided = quota_request_reject(
            admin=signed_in_user(request), quota_request_id=one.pk, note=data.validated_data["note"]
        )
        return Response(QuotaRequestOutput(decided).data)


# Priority classes and policy --------------------------------------------------------------------


class PriorityClassSerializer(serializers.Serializer):
    id = serializers.IntegerField(read_only=True)
    name = serializers.SlugField(max_length=50)
    value = serializers.IntegerField(min_value=-(2**31), max_value=2**31 - 1, help_text="Higher runs first.")
    kind = serializers.ChoiceField(choices=PriorityClass.Kind.choices)
    preemptible = serializers.BooleanField()
    may_preempt = serializers.BooleanField()


class PriorityClassViewSet(ApiViewSet):
    """Everyone reads the priority classes; fleet admins create and change them (audited)."""

    lookup_field = "name"
    lookup_value_regex = r"[-a-zA-Z0-9_]+"
    pagination_class = None
    queryset = PriorityClass.objects.none()  # for the schema: names the model

    def _one(self, name: str) -> PriorityClass:
        found = PriorityClass.objects.filter(name=name).first()
        if found is None:
            raise NotFound("No such priority class.")
        return found

    @extend_schema(responses=PriorityClassSerializer(many=True))
    def list(self, request: Request) -> Response:
        return Response(PriorityClassSerializer(PriorityClass.objects.order_by("-value", "name"), many=True).data)

    @extend_schema(responses=PriorityClassSerializer)
    def retrieve(self, request: Request, name: str) -> Response:
        return Response(PriorityClassSerializer(self._one(name)).data)

    @extend_schema(request=PriorityClassSerializer, responses={201: PriorityClassSerializer})
    def create(self, request: Request) -> Response:
        require_fleet_admin(request, "Only fleet admins change priority classes.")
        data = PriorityClassSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        saved = priority_class_save(actor=signed_in_user(request), **data.validated_data)
        return Response(PriorityClassSerializer(saved).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=PriorityClassSerializer, responses=PriorityClassSerializer)
    def partial_update(self, request: Request, name: str) -> Response:
        current = self._one(name)
        require_fleet_admin(request, "Only fleet admins change priority classes.")
        data = PriorityClassSerializer(current, data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        values = {**PriorityClassSerializer(current).data, **data.validated_data}
        values.pop("id")
        saved = priority_class_save(actor=signed_in_user(request), priority_class_id=current.pk, **values)
        return Response(PriorityClassSerializer(saved).data)


def _out_of_range_messages() -> dict[str, dict[str, Any]]:
    """Each policy number refused outside its bounds (`tenants.policy_units`, which the model's
    validators read too) with its range in words, in the API's units."""
    messages: dict[str, dict[str, Any]] = {}
    for described in policy_units.POLICY_FIELDS:
        if described.minimum is not None:
            # A validator fills in its message's %(limit_value)s: a literal percent sign is written twice.
            message = f"Must be {described.stored_range}.".replace("%", "%%")
            messages[described.name] = {"error_messages": {"min_value": message, "max_value": message}}
    return messages


class PolicySerializer(serializers.ModelSerializer):
    serializer_field_mapping = {
        **serializers.ModelSerializer.serializer_field_mapping,
        models.FloatField: StrictFloatField,
    }

    class Meta:
        model = FleetPolicy
        fields = [*POLICY_FIELDS, "updated_at"]
        read_only_fields = ["updated_at"]
        extra_kwargs = _out_of_range_messages()


class PolicyView(ApiView):
    """The fleet's scheduling policy: everyone reads it; fleet admins change it (audited), and
    the live cycle applies it from its next tick."""

    @extend_schema(responses=PolicySerializer)
    def get(self, request: Request) -> Response:
        return Response(PolicySerializer(fleet_policy_get()).data)

    @extend_schema(request=PolicySerializer, responses=PolicySerializer)
    def patch(self, request: Request) -> Response:
        require_fleet_admin(request, "Only fleet admins change the fleet policy.")
        data = PolicySerializer(fleet_policy_get(), data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        return Response(
            PolicySerializer(fleet_policy_update(actor=signed_in_user(request), changes=data.validated_data)).data
        )
