from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from portal.demo import demo_is_needed, demo_seed


class Command(BaseCommand):
    help = "Seed the demo fleet, teams and users (FLEETLINE_DEMO only) when the database is empty."

    def handle(self, *args: Any, **options: Any) -> None:
        # The demo logins have a published password: they belong to the demo, never to a real fleet.
        if not settings.FLEETLINE_DEMO:
            raise CommandError("Demo data belongs to the demo: set FLEETLINE_DEMO=1 (as `make run` does).")
        if not demo_is_needed():
            self.stdout.write("Database already has data; demo seed skipped.")
            return
        demo_seed()
        self.stdout.write(self.style.SUCCESS("Seeded the demo fleet, teams and users."))
