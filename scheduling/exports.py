"""The jobs list's history out as CSV cells: fleet calendar times and hours, every cell
spreadsheet-safe (``core.spreadsheet.row_safe``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import cast

from django.utils import timezone

from core.spreadsheet import row_safe

# The jobs list's history export (``/jobs/?format=csv``): one line per job, for people reading it in
# a spreadsheet: team names (the slug in its own column, for joining), fleet calendar times and
# hours, never raw fleet-clock seconds.
JOB_HISTORY_HEADERS = (
    "Job",
    "Name",
    "Team",
    "Team slug",
    "Submitted by",
    "Kind",
    "Priority class",
    "Accelerator",
    "GPUs",
    "State",
    "Submitted (fleet time)",
    "Started (fleet time)",
    "Finished (fleet time)",
    "Work at full size (h)",
    "Time limit (h)",
    "Restarts",
)
# The job fields each line is made of, in order: ``job_history_cells`` reads them as plain values.
JOB_HISTORY_FIELDS = (
    "pk",
    "name",
    "team__name",
    "team__slug",
    "submitted_by__username",
    "kind",
    "priority_class__name",
    "accelerator_type__name",
    "gpus",
    "state",
    "submit_s",
    "started_s",
    "finished_s",
    "duration_s",
    "time_limit_s",
    "restarts",
)


def _fleet_clock_cell(seconds: float | None, epoch: datetime) -> str:
    """A fleet-clock instant on the fleet calendar to the second (``2026-01-03 14:05:09``), in the
    site's time zone; empty when there is none."""
    if seconds is None:
        return ""
    return f"{timezone.localtime(epoch + timedelta(seconds=seconds)):%Y-%m-%d %H:%M:%S}"


def _hours_cell(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds / 3600:.2f}"


def job_history_cells(values: Sequence[object], *, epoch: datetime) -> list[object]:
    """One job's line from its ``JOB_HISTORY_FIELDS`` values, every cell spreadsheet-safe."""
    job = dict(zip(JOB_HISTORY_FIELDS, values, strict=True))
    return row_safe(
        (
            job["pk"],
            job["name"],
            job["team__name"],
            job["team__slug"],
            job["submitted_by__username"] or "",
            job["kind"],
            job["priority_class__name"],
            job["accelerator_type__name"],
            job["gpus"],
            job["state"],
            _fleet_clock_cell(cast(float | None, job["submit_s"]), epoch),
            _fleet_clock_cell(cast(float | None, job["started_s"]), epoch),
            _fleet_clock_cell(cast(float | None, job["finished_s"]), epoch),
            _hours_cell(cast(float | None, job["duration_s"])),
            _hours_cell(cast(float | None, job["time_limit_s"])),
            job["restarts"],
        )
    )
