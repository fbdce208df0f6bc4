"""`python manage.py simulate`: the simulator CLI (`python -m scheduling.sim`) as a management command."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any, TextIO, cast

from django.core.management.base import BaseCommand, CommandError

from scheduling.sim.cli import add_arguments, run


class Command(BaseCommand):
    help = "Replay job traces through the scheduling engine and report the metrics contract as JSON."

    def add_arguments(self, parser: ArgumentParser) -> None:
        add_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        namespace = type("Options", (), options)()
        # The command's wrappers are text streams (io.TextIOBase) that end lines as Django likes.
        code = run(namespace, cast(TextIO, self.stdout), cast(TextIO, self.stderr))
        if code:
            raise CommandError("simulation failed (see the errors above)", returncode=code)
