from __future__ import annotations

from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "scheduling"
    verbose_name = "Fleet and scheduling"

    def ready(self) -> None:
        # The team pages (tenants) show the scheduler's view of a team through this interface,
        # so that tenants imports nothing of scheduling but the pure engine and the bounds on numbers.
        from scheduling.team_activity import FleetTeamActivity
        from tenants.team_activity import team_activity_provide

        team_activity_provide(FleetTeamActivity())
