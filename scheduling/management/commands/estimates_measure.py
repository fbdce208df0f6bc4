"""`python manage.py estimates_measure`: how the live fleet's first estimates turned out."""

from __future__ import annotations

import json
from argparse import ArgumentParser
from dataclasses import asdict
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from scheduling.estimates import estimate_calibration, estimates_measure


class Command(BaseCommand):
    help = (
        "Of the jobs that started after a first estimate, the share whose start fell within the range "
        "shown with it; with the calibration the pages use now. JSON on stdout."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--since", type=float, default=0.0, help="only estimates first shown at or after this fleet second"
        )

    def handle(self, *args: Any, since: float, **options: Any) -> None:
        if not 0.0 <= since < float("inf"):
            raise CommandError(f"--since {since}: a fleet second, 0 or more")
        measured = estimates_measure(since_s=since)
        calibration = estimate_calibration()
        report = {
            "since_s": since,
            "started": measured.started,
            "within_range": measured.within,
            "estimate_within_range": measured.share,
            "restarted_left_out": measured.restarted_left_out,
            "still_waiting": measured.waiting,
            "calibration": {
                **asdict(calibration),
                # The last band is open: null, as strict JSON has no infinity.
                "bands": [{**asdict(band), "up_to_s": _finite(band.up_to_s)} for band in calibration.bands],
            },
        }
        self.stdout.write(json.dumps(report, indent=2, sort_keys=True))


def _finite(seconds: float) -> float | None:
    return None if seconds == float("inf") else seconds
