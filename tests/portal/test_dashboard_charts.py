"""Dashboard charts: whole-number ticks for job counts, a text alternative for each chart, and
the per-team share naming only the viewer's own teams (every team for fleet admins)."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from core.charts import SharePoint, count_tick_step, utilisation_figure
from scheduling.selectors import OTHER_TEAMS, team_gpus_now
from tenants.roles import FLEET_ADMIN
from tests.factories import MembershipFactory, TeamFactory, UserFactory
from tests.scheduling.conftest import build_fleet


@pytest.mark.parametrize(
    ("largest", "step"), [(0, 1), (3, 1), (5, 1), (6, 2), (11, 5), (24, 5), (26, 10), (120, 50), (1000, 200)]
)
def test_job_count_ticks_are_whole_and_about_five(largest: int, step: int) -> None:
    assert count_tick_step(largest) == step


def test_the_pending_jobs_axis_has_integer_ticks() -> None:
    points = [SharePoint(60.0 * i, 8, 8, 0, 32, i % 3, 32) for i in range(10)]
    axis = json.loads(utilisation_figure(points))["layout"]["yaxis2"]
    assert axis["dtick"] == 1 and axis["tickformat"] == ",d"


@pytest.mark.django_db
def test_the_team_share_names_only_the_viewers_teams_and_merges_the_rest() -> None:
    fleet = build_fleet()
    vision = TeamFactory(name="Vision", slug="vision")
    fleet.submit(gpus=8, name="ours")
    fleet.submit(gpus=16, name="theirs", team=vision)
    fleet.tick()
    member = MembershipFactory(team=fleet.team).user
    admin = UserFactory()
    admin.groups.add(Group.objects.get_or_create(name=FLEET_ADMIN)[0])

    assert {(row.label, row.gpus, row.own) for row in team_gpus_now(user=member)} == {
        ("Language Models", 8, True),
        (OTHER_TEAMS, 16, False),
    }
    assert {row.label for row in team_gpus_now(user=admin)} == {"Language Models", "Vision"}

    client = Client()
    client.force_login(member)
    page = client.get("/").content.decode()
    assert "Vision" not in page and "GPUs in use now: other teams 16, Language Models 8." in page
    assert 'aria-describedby="share-summary"' in page
