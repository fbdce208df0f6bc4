"""Trace import: canonical CSV, Microsoft ITP and Helios `cluster_log.csv`, into one record type.

Every importer reports what is wrong with a file as a `TraceError` naming the file, the line
(1-based, the header is line 1), the column and the problem, so a user can fix the file without
reading this code. By default the first error stops the import; `max_errors` collects more.
Every number is checked against the bounds in `scheduling.limits` (finite, a duration of at
most a year, a gang of at most 65,536 GPUs, ...), so a replay always ends.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from scheduling.limits import (
    MAX_CHECKPOINT_GB,
    MAX_CHECKPOINT_INTERVAL_S,
    MAX_DURATION_S,
    MAX_GANG_GPUS,
    MAX_PRIORITY,
    MAX_TIME_LIMIT_S,
    MAX_TRACE_SUBMIT_S,
    quantity,
)

FORMATS: tuple[str, ...] = ("canonical", "itp", "helios")
CANONICAL_REQUIRED: tuple[str, ...] = ("job_id", "submit_time", "duration", "gpus", "team")
CANONICAL_OPTIONAL: tuple[str, ...] = (
    "kind",
    "priority",
    "time_limit",
    "min_gpus",
    "max_gpus",
    "checkpoint_interval",
    "checkpoint_gb",
    "accelerator",
    "checkpoint_on_preempt",  # 1: the job checkpoints when told it is preempted (0 or empty: it does not)
)
ITP_REQUIRED: tuple[str, ...] = ("job_id", "submission_time", "duration", "num_gpu")
HELIOS_REQUIRED: tuple[str, ...] = ("job_id", "vc", "gpu_num", "submit_time", "duration")
KINDS: tuple[str, ...] = ("training", "serving", "batch")


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job of the canonical trace format (DESIGN.md "Trace format")."""

    job_id: str
    submit_s: float
    duration_s: float
    gpus: int
    team: str
    kind: str = "training"
    priority: int = 0
    time_limit_s: float | None = None
    min_gpus: int | None = None
    max_gpus: int | None = None
    checkpoint_interval_s: float | None = None
    checkpoint_gb: float = 0.0
    accelerator: str | None = None
    checkpoint_on_preempt: bool = False


class TraceError(ValueError):
    """A problem in a trace file; `errors` holds every problem found (this one first)."""

    def __init__(self, file: str, line: int | None, column: str | None, message: str) -> None:
        self.file, self.line, self.column, self.message = file, line, column, message
        self.errors: list[TraceError] = [self]
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        column = f" column {self.column!r}:" if self.column else ""
        return f"{where}:{column} {self.message}"


class _Collector:
    def __init__(self, max_errors: int) -> None:
        self.max_errors = max(1, max_errors)
        self.errors: list[TraceError] = []

    def add(self, error: TraceError) -> None:
        self.errors.append(error)
        if len(self.errors) >= self.max_errors:
            self.raise_if_any()

    def raise_if_any(self) -> None:
        if self.errors:
            first = self.errors[0]
            first.errors = list(self.errors)
            raise first


class _Row:
    """One CSV record with typed field readers that raise `TraceError` with the right place."""

    def __init__(self, file: str, line: int, values: dict[str, str]) -> None:
        self.file, self.line, self.values = file, line, values

    def error(self, column: str | None, message: str) -> TraceError:
        return TraceError(self.file, self.line, column, message)

    def text(self, column: str, *, required: bool = True) -> str | None:
        value = (self.values.get(column) or "").strip()
        if not value:
            if required:
                raise self.error(column, "is empty")
            return None
        return value

    def number(
        self, column: str, *, required: bool = True, minimum: float | None = None, maximum: float | None = None
    ) -> float | None:
        raw = self.text(column, required=required)
        if raw is None:
            return None
        try:
            value = float(raw)
        except ValueError:
            raise self.error(column, f"{raw!r} is not a number") from None
        if not math.isfinite(value):
            raise self.error(column, f"{raw!r} is not a finite number")
        if minimum is not None and value < minimum:
            raise self.error(column, f"{raw} is below the minimum {minimum:g}")
        if maximum is not None and value > maximum:
            raise self.error(column, f"{raw} is above the maximum {quantity(maximum)}")
        return value

    def integer(
        self, column: str, *, required: bool = True, minimum: int | None = None, maximum: int | None = None
    ) -> int | None:
        value = self.number(column, required=required, maximum=maximum)
        if value is None:
            return None
        if value != int(value):
            raise self.error(column, f"{self.values[column].strip()!r} is not a whole number")
        if minimum is not None and value < minimum:
            raise self.error(column, f"{int(value)} is below the minimum {minimum}")
        return int(value)


def _rows(path: Path, required: Sequence[str], collector: _Collector) -> Iterable[_Row]:
    name = str(path)
    try:
        handle = path.open(newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise TraceError(name, None, None, f"cannot be read: {exc.strerror or exc}") from None
    with handle:
        reader = csv.reader(handle)
        try:
            yield from _records(name, reader, required, collector)
        except csv.Error as exc:
            # The csv module's own refusals (a field over its size limit, a NUL byte): the file
            # cannot be read past this line, so the errors found so far end with this one.
            collector.add(TraceError(name, reader.line_num, None, f"is not readable CSV: {exc}"))
            collector.raise_if_any()


def _records(name: str, reader: Any, required: Sequence[str], collector: _Collector) -> Iterable[_Row]:
    header = next(reader, None)
    if header is None:
        raise TraceError(name, 1, None, "is empty: expected a header line")
    columns = [column.strip() for column in header]
    missing = [column for column in required if column not in columns]
    if missing:
        raise TraceError(name, 1, missing[0], f"required column is missing (header: {','.join(columns)})")
    for record in reader:
        if not record or all(not value.strip() for value in record):
            continue
        if len(record) != len(columns):
            collector.add(
                TraceError(name, reader.line_num, None, f"has {len(record)} fields, the header has {len(columns)}")
            )
            continue
        yield _Row(name, reader.line_num, dict(zip(columns, record, strict=True)))


def _parse_all(
    paths: Sequence[Path], required: Sequence[str], parse: Callable[[_Row, Path], TraceJob | None], max_errors: int
) -> list[TraceJob]:
    collector = _Collector(max_errors)
    jobs: list[TraceJob] = []
    seen: dict[str, str] = {}
    for path in paths:
        for row in _rows(path, required, collector):
            try:
                job = parse(row, path)
                if job is None:
                    continue
                if job.job_id in seen:
                    raise row.error("job_id", f"duplicate job id {job.job_id!r} (first at {seen[job.job_id]})")
            except TraceError as error:
                collector.add(error)
                continue
            seen[job.job_id] = f"{row.file}:{row.line}"
            jobs.append(job)
    collector.raise_if_any()
    # Submit times need not be monotonic in the file: a stable sort keeps file order on ties.
    return sorted(jobs, key=lambda job: job.submit_s)


def _parse_canonical(row: _Row, path: Path) -> TraceJob:
    gpus = row.integer("gpus", minimum=1, maximum=MAX_GANG_GPUS)
    kind = row.text("kind", required=False) or "training"
    if kind not in KINDS:
        raise row.error("kind", f"{kind!r} is not one of {', '.join(KINDS)}")
    min_gpus = row.integer("min_gpus", required=False, minimum=1, maximum=MAX_GANG_GPUS)
    max_gpus = row.integer("max_gpus", required=False, minimum=1, maximum=MAX_GANG_GPUS)
    assert gpus is not None
    if min_gpus is not None and min_gpus > gpus:
        raise row.error("min_gpus", f"{min_gpus} is larger than gpus ({gpus})")
    if max_gpus is not None and max_gpus < gpus:
        raise row.error("max_gpus", f"{max_gpus} is smaller than gpus ({gpus})")
    time_limit = row.number("time_limit", required=False, maximum=MAX_TIME_LIMIT_S)
    if time_limit is not None and time_limit <= 0:
        raise row.error("time_limit", f"{time_limit:g} must be positive")
    interval = row.number("checkpoint_interval", required=False, maximum=MAX_CHECKPOINT_INTERVAL_S)
    if interval is not None and interval <= 0:
        raise row.error("checkpoint_interval", f"{interval:g} must be positive")
    return TraceJob(
        job_id=row.text("job_id") or "",
        submit_s=row.number("submit_time", minimum=0.0, maximum=MAX_TRACE_SUBMIT_S) or 0.0,
        duration_s=row.number("duration", minimum=0.0, maximum=MAX_DURATION_S) or 0.0,
        gpus=gpus,
        team=row.text("team") or "",
        kind=kind,
        priority=row.integer("priority", required=False, minimum=-MAX_PRIORITY, maximum=MAX_PRIORITY) or 0,
        time_limit_s=time_limit,
        min_gpus=min_gpus,
        max_gpus=max_gpus,
        checkpoint_interval_s=interval,
        checkpoint_gb=row.number("checkpoint_gb", required=False, minimum=0.0, maximum=MAX_CHECKPOINT_GB) or 0.0,
        accelerator=row.text("accelerator", required=False),
        checkpoint_on_preempt=bool(row.integer("checkpoint_on_preempt", required=False, minimum=0, maximum=1)),
    )


def _parse_itp(row: _Row, path: Path) -> TraceJob:
    team = path.stem
    return TraceJob(
        job_id=f"{team}:{row.text('job_id')}",
        submit_s=row.number("submission_time", minimum=0.0, maximum=MAX_TRACE_SUBMIT_S) or 0.0,
        duration_s=row.number("duration", minimum=0.0, maximum=MAX_DURATION_S) or 0.0,
        gpus=row.integer("num_gpu", minimum=1, maximum=MAX_GANG_GPUS) or 0,
        team=team,
    )


def load_canonical(paths: Sequence[str | Path], *, max_errors: int = 1) -> list[TraceJob]:
    return _parse_all([Path(p) for p in paths], CANONICAL_REQUIRED, _parse_canonical, max_errors)


def load_itp(paths: Sequence[str | Path], *, max_errors: int = 1) -> list[TraceJob]:
    """ITP CSVs (`job_id,submission_time,duration,num_gpu`); each file is one team, named by its stem."""
    return _parse_all([Path(p) for p in paths], ITP_REQUIRED, _parse_itp, max_errors)


def load_helios(paths: Sequence[str | Path], *, max_errors: int = 1) -> list[TraceJob]:
    """Helios `cluster_log.csv`: team = vc, CPU-only jobs skipped, times relative to the first submission."""
    stamps: dict[str, float | datetime] = {}
    places: dict[str, tuple[str, int]] = {}

    def parse(row: _Row, path: Path) -> TraceJob | None:
        gpus = row.integer("gpu_num", minimum=0, maximum=MAX_GANG_GPUS)
        if not gpus:
            return None
        raw = row.text("submit_time") or ""
        submitted: float | datetime
        try:
            submitted = float(raw)
        except ValueError:
            try:
                submitted = datetime.fromisoformat(raw)
            except ValueError:
                raise row.error("submit_time", f"{raw!r} is neither seconds nor a date-time") from None
        if isinstance(submitted, float) and not math.isfinite(submitted):
            raise row.error("submit_time", f"{raw!r} is not a finite number")
        job_id = f"{row.text('job_id')}"
        stamps[job_id] = submitted
        places[job_id] = (row.file, row.line)
        return TraceJob(
            job_id=job_id,
            submit_s=0.0,
            duration_s=_helios_duration(row),
            gpus=gpus,
            team=row.text("vc") or "",
        )

    jobs = _parse_all([Path(p) for p in paths], HELIOS_REQUIRED, parse, max_errors)
    kinds = {type(stamp) for stamp in stamps.values()}
    if len(kinds) > 1:
        raise TraceError(str(paths[0]), None, "submit_time", "mixes seconds and date-times")
    try:
        origin = min(stamps.values(), default=0.0)
        offsets = {job_id: _seconds_between(origin, stamp) for job_id, stamp in stamps.items()}
    except TypeError:
        raise TraceError(str(paths[0]), None, "submit_time", "mixes time zones") from None
    _check_spans(offsets, places, max_errors)
    return sorted(
        (_with_submit(job, offsets[job.job_id]) for job in jobs),
        key=lambda job: job.submit_s,
    )


def _check_spans(offsets: dict[str, float], places: dict[str, tuple[str, int]], max_errors: int) -> None:
    """Submissions within the longest trace span: seconds from the first submission are known
    only once every row is read, so this check runs after the others."""
    collector = _Collector(max_errors)
    for job_id, offset in offsets.items():
        if offset > MAX_TRACE_SUBMIT_S:
            file, line = places[job_id]
            message = f"is {quantity(round(offset))} s after the first submission, above the maximum"
            collector.add(TraceError(file, line, "submit_time", f"{message} {quantity(MAX_TRACE_SUBMIT_S)}"))
    collector.raise_if_any()


def _helios_duration(row: _Row) -> float:
    duration = row.number("duration", required=False, minimum=0.0, maximum=MAX_DURATION_S)
    if duration is not None:
        return duration
    start, end = row.text("start_time", required=False), row.text("end_time", required=False)
    if start is None or end is None:
        raise row.error("duration", "is empty and start_time/end_time do not give it")
    try:
        duration = max(0.0, _seconds_between(_stamp(start), _stamp(end)))
    except (ValueError, TypeError):
        raise row.error("duration", "is empty and start_time/end_time are not valid times") from None
    if not duration <= MAX_DURATION_S:
        raise row.error("duration", f"from start_time/end_time is above the maximum {quantity(MAX_DURATION_S)}")
    return duration


def _stamp(raw: str) -> float | datetime:
    try:
        return float(raw)
    except ValueError:
        return datetime.fromisoformat(raw)


def _seconds_between(origin: float | datetime, stamp: float | datetime) -> float:
    if isinstance(origin, datetime) and isinstance(stamp, datetime):
        return (stamp - origin).total_seconds()
    if isinstance(origin, datetime) or isinstance(stamp, datetime):
        raise TypeError("mixed stamps")
    return float(stamp) - float(origin)


def _with_submit(job: TraceJob, submit_s: float) -> TraceJob:
    return TraceJob(job.job_id, submit_s, job.duration_s, job.gpus, job.team)


LOADERS: dict[str, Callable[..., list[TraceJob]]] = {
    "canonical": load_canonical,
    "itp": load_itp,
    "helios": load_helios,
}


def load_trace(paths: Sequence[str | Path], fmt: str, *, max_errors: int = 1) -> list[TraceJob]:
    if fmt not in LOADERS:
        raise ValueError(f"unknown trace format {fmt!r}: expected one of {', '.join(FORMATS)}")
    if not paths:
        raise ValueError("no trace file given")
    return LOADERS[fmt](paths, max_errors=max_errors)
