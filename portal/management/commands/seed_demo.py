from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from portal.demo import demo_is_needed, demo_seed


class Command(BaseCommand):
    help = "Seed the demo fleet, teams and users when the database is empty."

    def handle(self, *args: Any, **options: Any) -> None:
        if not demo_is_needed():
            self.stdout.write("Database already has data; demo seed skipped.")
            return
        demo_seed()
        self.stdout.write(self.style.SUCCESS("Seeded the demo fleet, teams and users."))
