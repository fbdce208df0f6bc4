"""Channel-layer group names, in one place so publishers and consumers agree."""

from __future__ import annotations

FLEET_GROUP = "fleet"
# Every job event of every team: fleet admins join it.
ALL_JOBS_GROUP = "jobs.all"


def team_group(team_id: int) -> str:
    return f"team.{team_id}"
