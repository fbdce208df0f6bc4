"""Pages say what holds a waiting job, by name, and a tick tells open pages only what changed.

A job's page, the jobs list and the team page name the one thing that holds a pending job (its
team's limit and how many GPUs it is short, the job ahead with a link), never an internal id; each
committed tick publishes the waits that changed since the previous tick, batched per team: one
message per team (and one for fleet admins) however many jobs changed, none when nothing did."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.test import Client

from core.groups import ALL_JOBS_GROUP, team_group
from scheduling.cycle.leader import LOCK_KEY
from scheduling.live.waits import WAITS_KEY, WAITS_VERSION_KEY, job_waits_for
from scheduling.models import Job
from tenants.models import Quota
from tests.factories import MembershipFactory, QuotaFactory, TeamFactory
from tests.scheduling.conftest import Fleet, build_fleet
from tests.scheduling.test_views import _form


@pytest.fixture
def member(fleet: Fleet) -> Client:
    client = Client()
    client.force_login(MembershipFactory(team=fleet.team).user)
    return client


def _limited(fleet: Fleet, borrow_limit: int) -> None:
    Quota.objects.filter(team=fleet.team).update(borrow_limit=borrow_limit)


def test_a_job_over_its_teams_limit_says_which_limit_and_how_many_gpus_short(fleet: Fleet, member: Client) -> None:
    _limited(fleet, 0)  # the team may hold its guarantee, 16 GPUs, and no more
    fleet.submit(gpus=16, name="runner")
    fleet.tick()
    waiting = fleet.submit(gpus=8, name="waiter")
    fleet.tick()

    page = member.get(f"/jobs/{waiting.pk}/").content.decode()

    said = "Language Models holds 16 of the 16 H100 GPUs it may use (guarantee plus borrow limit): 8 GPUs short"
    assert said in page
    assert "team 1" not in page and "kept for its first waiting job" not in page
    rows = member.get("/jobs/?part=rows").content.decode()
    assert said in rows
    team_page = member.get(f"/teams/{fleet.team.slug}/").content.decode()
    assert said in team_page
    api = member.get(f"/api/v1/jobs/{waiting.pk}/").json()
    assert api["pending"]["reason"] == "quota" and said in api["pending"]["explanation"]


def test_a_job_behind_the_job_ahead_links_to_it_by_name(fleet: Fleet, member: Client) -> None:
    fleet.submit(gpus=32, name="whole-fleet", time_limit_s=7200.0)
    fleet.tick()
    first = fleet.submit(gpus=8, name="first-in-line")
    second = fleet.submit(gpus=8, name="second-in-line")
    fleet.tick()

    page = member.get(f"/jobs/{second.pk}/").content.decode()

    assert "8 more H100 GPUs must free up (0 free now); " in page
    assert f'<a href="/jobs/{first.pk}/" class="blocker-job">first-in-line (#{first.pk})</a> is ahead of it' in page


def test_another_teams_job_ahead_is_told_by_its_team_without_its_name_or_link(fleet: Fleet, member: Client) -> None:
    others = TeamFactory(name="Vision", slug="vision")
    QuotaFactory(team=others, accelerator_type=fleet.accelerator, guaranteed=16, borrow_limit=64)
    fleet.submit(gpus=32, name="whole-fleet", time_limit_s=7200.0)
    fleet.tick()
    first = fleet.submit(gpus=8, name="secret-vision-run", team=others)
    second = fleet.submit(gpus=8, name="second-in-line")
    fleet.tick()

    page = member.get(f"/jobs/{second.pk}/").content.decode()
    rows = member.get("/jobs/?part=rows").content.decode()

    assert "a job of Vision is ahead of it" in page and "a job of Vision is ahead of it" in rows
    for shown in (page, rows):
        assert "secret-vision-run" not in shown and f"/jobs/{first.pk}/" not in shown


def test_a_job_name_in_a_reason_is_escaped(fleet: Fleet, member: Client) -> None:
    fleet.submit(gpus=32, name="whole-fleet", time_limit_s=7200.0)
    fleet.tick()
    fleet.submit(gpus=8, name="<b>bold</b>")
    second = fleet.submit(gpus=8, name="after")
    fleet.tick()

    page = member.get(f"/jobs/{second.pk}/").content.decode()

    assert "&lt;b&gt;bold&lt;/b&gt;" in page and "<b>bold</b>" not in page


def test_the_start_preview_names_the_same_blocker_the_job_would_wait_for(fleet: Fleet, member: Client) -> None:
    # The team may borrow up to 64 beyond its 16 by its own limit; another team's idle guarantee
    # of the other 16 lends none, so a 24-GPU job waits for lending, not for the team's limit.
    QuotaFactory(
        team=TeamFactory(name="Vision", slug="vision"), accelerator_type=fleet.accelerator, guaranteed=16, lend_limit=0
    )
    form = member.get("/jobs/new/").content.decode()

    preview = member.get("/jobs/new/estimate/", _form(fleet, gpus=24)).content.decode()
    waiting = fleet.submit(gpus=24, name="big")
    fleet.tick()
    page = member.get(f"/jobs/{waiting.pk}/").content.decode()

    assert "up to 80 with borrowing, as far as other teams lend idle GPUs" in form
    said = "beyond Language Models&#x27;s guarantee it must borrow, and other teams lend only 0 H100 GPUs now: 8 short"
    assert said in preview
    assert said in page


async def _received(layer: Any, channel: str) -> list[dict[str, Any]]:
    """Every waits event sent to the channel so far."""
    found = []
    while True:
        try:
            message = await asyncio.wait_for(layer.receive(channel), 0.5)
        except TimeoutError:
            return found
        if message["payload"]["kind"] == "waits":
            found.append(message["payload"])


@pytest.mark.django_db(transaction=True)
async def test_a_tick_publishes_only_the_waits_that_changed_in_one_message_per_team(transactional_db: None) -> None:
    redis.Redis.from_url(settings.REDIS_URL).delete(LOCK_KEY, WAITS_KEY, WAITS_VERSION_KEY)
    fleet = await database_sync_to_async(build_fleet)()
    layer = get_channel_layer()
    team, admins = await layer.new_channel(), await layer.new_channel()
    await layer.group_add(team_group(fleet.team.pk), team)
    await layer.group_add(ALL_JOBS_GROUP, admins)
    submit = database_sync_to_async(fleet.submit)
    await submit(gpus=32, name="whole-fleet", time_limit_s=7200.0)
    await database_sync_to_async(fleet.tick)()
    await _received(layer, team)
    await _received(layer, admins)
    waiting = [await submit(gpus=8, name=f"waiting-{n}", time_limit_s=3600.0) for n in range(6)]

    await database_sync_to_async(fleet.tick)()
    first = await _received(layer, team)
    await database_sync_to_async(fleet.tick)()
    unchanged = await _received(layer, team)
    late = await submit(gpus=8, name="late", time_limit_s=3600.0)
    await database_sync_to_async(fleet.tick)()
    one_more = await _received(layer, team)
    to_admins = await _received(layer, admins)

    # Six jobs waited for the first time: one message names all six, with what holds each.
    assert len(first) == 1
    assert sorted(change["id"] for change in first[0]["jobs"]) == sorted(job.pk for job in waiting)
    second = next(change for change in first[0]["jobs"] if change["id"] == waiting[1].pk)
    assert second["blocker"]["kind"] == "capacity" and second["blocker"]["job"] == waiting[0].pk
    assert second["text"] == f"8 more H100 GPUs must free up (0 free now); waiting-0 (#{waiting[0].pk}) is ahead of it"
    # Nothing changed: nothing is sent.
    assert unchanged == []
    # One job joined the queue: one message, naming it alone.
    assert [[change["id"] for change in event["jobs"]] for event in one_more] == [[late.pk]]
    assert len(to_admins) == 2  # fleet admins get each tick's batch of every team, once
    stored = await database_sync_to_async(job_waits_for)(job_ids=[late.pk])
    assert stored[late.pk].blocker is not None and stored[late.pk].blocker.job_id == str(waiting[0].pk)
    await layer.group_discard(team_group(fleet.team.pk), team)
    await layer.group_discard(ALL_JOBS_GROUP, admins)


def test_a_job_already_running_shows_where_its_counter_starts(fleet: Fleet, member: Client) -> None:
    job = fleet.submit(gpus=8, name="runner", time_limit_s=7200.0)
    fleet.tick()
    job = Job.objects.get(pk=job.pk)

    page = member.get(f"/jobs/{job.pk}/").content.decode()

    assert f'data-fleet-since="{job.started_s:.0f}"' in page
    assert f'data-fleet-until="{job.started_s + 7200.0:.0f}"' in page
