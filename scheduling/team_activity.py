"""The scheduler's side of the team pages (`tenants.team_activity.TeamActivity`): the team list's
rows, the team page's quotas with what the team uses, borrows and lends now, and its queue (each
job with why it waits and when it starts, in words, so the team page loads none of the
scheduler's template tags), usage chart and fair-share standing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from django.db.models import QuerySet

from core.charts import KindSeries, team_usage_figure, usage_summary_text
from scheduling.listed import ListedJob
from scheduling.models import Job
from scheduling.selectors import (
    fairshare_standings,
    pending_jobs_for_team,
    quota_overview_for_team,
    team_overview_rows,
    team_usage_series,
)
from scheduling.services.jobs import fleet_now_s
from scheduling.templatetags.fleet import starts_in, wait_reason
from tenants.models import Team
from tenants.selectors import QuotaRow


@dataclass(frozen=True, slots=True)
class QueuedJob:
    """A job in a team's queue, with why it waits and when it should start, in words."""

    job: Job | ListedJob
    why: str  # safe HTML: the job ahead is a link
    starts: str
    estimated_start_s: float | None = None  # for the page to count down to


def team_queue(*, team: Team, now_s: float) -> list[QueuedJob]:
    return [
        QueuedJob(
            row.job,
            wait_reason(row.wait),
            starts_in(row.wait, now_s),
            None if row.wait is None else row.wait.estimated_start_s,
        )
        for row in pending_jobs_for_team(team=team)
    ]


class FleetTeamActivity:
    def overview_rows(self, *, teams: QuerySet[Team]) -> Sequence[object]:
        return team_overview_rows(teams=teams)

    def quota_overview(self, *, team: Team) -> list[QuotaRow]:
        return quota_overview_for_team(team=team)

    def page_context(self, *, team: Team) -> Mapping[str, object]:
        now_s = fleet_now_s()
        points = team_usage_series(team=team, sim_now_s=now_s)
        series = KindSeries([p.sim_time_s for p in points], [p.gpus_by_kind for p in points])
        return {
            "now_s": now_s,
            "pending_jobs": team_queue(team=team, now_s=now_s),
            "usage_chart": team_usage_figure(series, title=f"{team.name}: GPUs in use, last fleet day"),
            "usage_summary": usage_summary_text(series),
            "standing": fairshare_standings(sim_now_s=now_s).get(team.pk),
        }
