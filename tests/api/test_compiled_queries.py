"""Compiled queries and inserts (``core.compiled_queries``) give what their ORM definitions
give: the same rows for every argument, found or not, and the same stored row."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.db.models.signals import pre_save

from api.authentication import TOKEN_CANDIDATES
from api.services import api_token_create
from api.views.jobs import MEMBER_TEAM
from core.compiled_queries import CompiledInsert, CompiledQuery, attnames, instance_from
from fleet.models import Node, Pod, Rack
from scheduling.listed import listed_by_id, listed_from, listed_query
from scheduling.models import AcceleratorType, Job, SchedulerEvent
from scheduling.selectors import FLEET_NODES, FLEET_RACKS, TEAM_GPUS, fleet_summary
from scheduling.services.jobs import (
    ACCELERATOR_LOOKUPS,
    ACCELERATOR_LOOKUPS_WITH_TOPOLOGY,
    EVENT_INSERT,
    FLEET_NOW,
    JOB_INSERT,
    PRIORITY_CLASS,
)
from scheduling.serving_shortfall import WAITING_REPLICAS
from tenants.models import Notification, PriorityClass, Team
from tenants.permissions import GROUP_NAMES, TEAM_IDS
from tenants.roles import FLEET_ADMIN
from tenants.selectors import UNREAD
from tests.api.conftest import People

pytestmark = pytest.mark.django_db


def _same_rows(query: CompiledQuery, **arguments: Any) -> list[dict[str, Any]]:
    compiled = query.rows(**arguments)
    assert compiled == list(query.build(**arguments))
    assert [list(row) for row in compiled] == [list(row) for row in query.build(**arguments)]  # column order too
    return compiled


def test_each_compiled_query_answers_as_its_queryset(people: People) -> None:
    fleet = people.fleet
    secret = api_token_create(user=people.admin, name="compiled").secret
    api_token_create(user=people.member, name="other")
    for token_key in (secret[:15], secret[:8], "fl_nothing_here"):
        rows = _same_rows(TOKEN_CANDIDATES, token_key=token_key)
    assert len(_same_rows(TOKEN_CANDIDATES, token_key=secret[:15])) == 1
    users = [people.member, people.lead, people.outsider, people.admin]
    teams = [fleet.team, *Team.objects.exclude(pk=fleet.team.pk)]
    hits = 0
    for user in users:
        for slug in [team.slug for team in teams] + ["no-such-team"]:
            hits += len(_same_rows(MEMBER_TEAM, user_id=user.pk, slug=slug))
    assert hits == 3  # lead and member of one team, the outsider of the other
    accelerators = [fleet.accelerator.pk, AcceleratorType.objects.create(name="A100", memory_gb=80).pk, 10**6]
    for accelerator_type_id in accelerators:
        for team in teams:
            for lookups in (ACCELERATOR_LOOKUPS, ACCELERATOR_LOOKUPS_WITH_TOPOLOGY):
                rows = _same_rows(lookups, accelerator_type_id=accelerator_type_id, team_id=team.pk)
    rows = ACCELERATOR_LOOKUPS.rows(accelerator_type_id=fleet.accelerator.pk, team_id=fleet.team.pk)
    assert rows[0]["fleet_gpus"] == 32 and rows[0]["quota_borrow_limit"] == 64
    assert (rows[0]["largest_node_gpus"], rows[0]["whole_nodes"]) == (8, 4)
    rows = ACCELERATOR_LOOKUPS_WITH_TOPOLOGY.rows(accelerator_type_id=fleet.accelerator.pk, team_id=fleet.team.pk)
    assert (rows[0]["rack_whole_nodes"], rows[0]["pod_whole_nodes"]) == (2, 4)
    for priority_class_id in [*PriorityClass.objects.values_list("pk", flat=True), 10**6]:
        _same_rows(PRIORITY_CLASS, priority_class_id=priority_class_id)


def test_an_instance_from_a_row_is_the_one_the_orm_reads(people: People) -> None:
    row = MEMBER_TEAM.first(user_id=people.member.pk, slug=people.fleet.team.slug)
    assert row is not None
    team = instance_from(Team, row)
    assert team == people.fleet.team and not team._state.adding and team._state.db == "default"
    assert {f.attname: getattr(team, f.attname) for f in Team._meta.concrete_fields} == {
        f.attname: getattr(people.fleet.team, f.attname) for f in Team._meta.concrete_fields
    }
    token_row = TOKEN_CANDIDATES.rows(token_key=api_token_create(user=people.lead, name="t").secret[:15])[0]
    assert instance_from(User, token_row, prefix="user__") == people.lead


def _users_named(name: str) -> QuerySet[User, dict[str, Any]]:
    return User.objects.filter(username__contains=name).values("pk")


def _users_with_id(user_id: int) -> QuerySet[User, dict[str, Any]]:
    return User.objects.filter(pk=user_id).values(*attnames(User))


def test_an_argument_that_is_not_a_parameter_of_its_own_is_refused() -> None:
    with pytest.raises(ValueError, match="name"):
        CompiledQuery(_users_named, name=str).rows(name="x")


def test_arguments_of_the_wrong_type_are_refused_and_huge_ids_match_nothing(people: People) -> None:
    query = CompiledQuery(_users_with_id, user_id=int)
    with pytest.raises(TypeError):
        query.rows(user_id=str(people.member.pk))
    with pytest.raises(TypeError):
        query.rows(user_id=True)
    with pytest.raises(TypeError):
        query.rows(other=1)
    with pytest.raises(TypeError):
        CompiledQuery(_users_with_id, user_id=float)
    assert query.rows(user_id=2**70) == list(User.objects.filter(pk=2**70).values(*attnames(User))) == []
    assert query.first(user_id=people.member.pk) == _users_with_id(people.member.pk).first()


def _stored(model: type[Any], pk: int) -> dict[str, Any]:
    return model.objects.filter(pk=pk).values(*attnames(model)).get()


def test_a_compiled_insert_stores_the_row_that_create_stores(people: People) -> None:
    fleet = people.fleet
    values: dict[str, Any] = dict(
        team=fleet.team,
        submitted_by=people.member,
        name="compiled",
        kind="training",
        priority_class=fleet.training,
        accelerator_type=fleet.accelerator,
        gpus=4,
        min_gpus=2,
        max_gpus=8,
        duration_s=600.0,
        time_limit_s=1200.0,
        checkpoint_interval_s=300.0,
        checkpoint_gb=1.5,
        checkpoint_on_preempt=True,
        required_level="rack",
        submit_s=12.5,
        idempotency_key="key",
        idempotency_digest="digest",
    )
    compiled = JOB_INSERT.create(**values)
    plain = Job.objects.create(**{**values, "idempotency_key": "key-2"})
    assert isinstance(compiled.pk, int) and compiled.pk != plain.pk
    assert not compiled._state.adding and compiled._state.db == "default"
    ignore = {"id", "created_at", "idempotency_key"}
    stored, reference = _stored(Job, compiled.pk), _stored(Job, plain.pk)
    assert {k: v for k, v in stored.items() if k not in ignore} == {
        k: v for k, v in reference.items() if k not in ignore
    }
    assert compiled.created_at == stored["created_at"]  # auto_now_add went through pre_save
    event = EVENT_INSERT.create(job=compiled, team=fleet.team, kind="submitted", sim_time_s=1.0, message="m")
    assert _stored(SchedulerEvent, event.pk)["job_id"] == compiled.pk


def test_a_compiled_insert_saves_as_django_does_when_someone_listens(people: People) -> None:
    seen: list[Any] = []

    def listener(sender: Any, instance: Any, **kwargs: Any) -> None:
        seen.append(instance)

    pre_save.connect(listener, sender=Team)
    try:
        team = CompiledInsert(Team).create(name="Listened", slug="listened", department=people.fleet.team.department)
    finally:
        pre_save.disconnect(listener, sender=Team)
    assert seen == [team] and Team.objects.filter(slug="listened").exists()


def test_the_pages_compiled_queries_answer_as_their_querysets(people: People) -> None:
    """Each page's roles, teams, unread count and fleet clock, for users with and without them."""
    Notification.objects.create(user=people.member, message="one")
    Notification.objects.create(user=people.member, message="two")
    Notification.objects.create(user=people.member, message="read", read=True)
    Notification.objects.create(user=people.lead, message="read", read=True)
    users = [people.member, people.lead, people.outsider, people.admin, people.finance]
    for user in users:
        _same_rows(GROUP_NAMES, user_id=user.pk)
        _same_rows(TEAM_IDS, user_id=user.pk)
        _same_rows(UNREAD, user_id=user.pk)
    assert [row["name"] for row in GROUP_NAMES.rows(user_id=people.admin.pk)] == [FLEET_ADMIN]
    assert UNREAD.rows(user_id=people.member.pk) == [{"user_id": people.member.pk, "unread": 2}]
    assert UNREAD.rows(user_id=people.lead.pk) == []
    assert _same_rows(FLEET_NOW) == [{"sim_now_s": 0.0}]
    assert _same_rows(TEAM_GPUS) == []
    people.fleet.submit(gpus=8, name="runs")
    people.fleet.tick()
    assert _same_rows(FLEET_NOW)[0]["sim_now_s"] > 0.0
    assert [row["total"] for row in _same_rows(TEAM_GPUS)] == [8]
    Pod.objects.create(name="empty-pod")
    Node.objects.filter(pk=Node.objects.order_by("id")[0].pk).update(state=Node.State.DOWN, healthy_gpus=0)
    _same_rows(FLEET_RACKS)
    _same_rows(WAITING_REPLICAS)
    _same_rows(FLEET_NODES)
    people.fleet.submit(gpus=1, name="waits")
    jobs = list(Job.objects.order_by("id").values_list("id", flat=True))
    ids = {"id0": jobs[-1], "id1": 10**6, "id2": jobs[0]}
    assert {row["id"] for row in _same_rows(listed_query(3), **ids)} == {jobs[0], jobs[-1]} and jobs[0] != jobs[-1]
    assert [job.id for job in listed_by_id([jobs[-1], 10**6, jobs[0]])] == [jobs[-1], jobs[0]]
    assert listed_by_id([jobs[0]]) == [listed_from(Job.objects.get(pk=jobs[0]))]
    summary = fleet_summary()
    assert (summary.pods, summary.racks) == (Pod.objects.count(), Rack.objects.count())
    assert (summary.nodes, summary.nodes_up) == (Node.objects.count(), Node.objects.filter(state=Node.State.UP).count())
    assert summary.healthy_gpus == sum(Node.objects.values_list("healthy_gpus", flat=True)) < summary.gpus
