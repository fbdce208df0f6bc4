"""The fleet's Prometheus series, built at scrape time from ``fleet_metrics_read``.

A custom collector on a registry of its own, rather than gauges and counters updated by the
processes that change the fleet: see ``observability.selectors`` for why the figures come from
the database and Redis. Labels: ``team`` (slug), ``accelerator`` (type name), ``kind``
(serving / training / batch), ``state`` and ``reason``; fleet-wide and per-accelerator figures are
sums over them (``sum by (accelerator) (fleetline_gpus_allocated)``).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from observability.selectors import FleetMetrics, IncidentHistogram, fleet_metrics_read


class FleetCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        metrics = fleet_metrics_read()
        yield from _gauges(metrics)
        yield from _counters(metrics)
        yield from _histograms(metrics)


def _gauge(name: str, documentation: str, labels: list[str], values: dict) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation, labels=labels)
    for key, value in sorted(values.items()):
        family.add_metric(list(key) if isinstance(key, tuple) else [key], value)
    return family


def _counter(name: str, documentation: str, labels: list[str], values: dict) -> CounterMetricFamily:
    family = CounterMetricFamily(name, documentation, labels=labels)
    for key, value in sorted(values.items()):
        family.add_metric(list(key) if isinstance(key, tuple) else [key], value)
    return family


def _gauges(metrics: FleetMetrics) -> Iterator[Metric]:
    yield _gauge("fleetline_gpus_capacity", "GPUs installed.", ["accelerator"], metrics.capacity_gpus)
    yield _gauge(
        "fleetline_gpus_healthy", "GPUs healthy on nodes that are not down.", ["accelerator"], metrics.healthy_gpus
    )
    yield _gauge("fleetline_nodes", "Nodes by state.", ["accelerator", "state"], metrics.nodes)
    yield _gauge(
        "fleetline_gpus_allocated",
        "GPUs held by running jobs.",
        ["team", "accelerator", "kind"],
        metrics.allocated_gpus,
    )
    yield _gauge(
        "fleetline_gpus_borrowed",
        "GPUs held by running jobs beyond their team's guarantee (preemptible by the lenders).",
        ["team", "accelerator"],
        metrics.borrowed_gpus,
    )
    yield _gauge("fleetline_jobs", "Pending and running jobs.", ["team", "accelerator", "state"], metrics.jobs)
    yield _gauge(
        "fleetline_jobs_pending_by_reason",
        "Pending jobs by the latest cycle's reason (new: not yet seen by a cycle).",
        ["team", "reason"],
        metrics.pending_by_reason,
    )
    yield _gauge("fleetline_incidents_open", "Incidents not yet recovered.", ["kind"], metrics.open_incidents)
    yield _gauge("fleetline_redis_up", "1 when Redis answered this scrape.", [], {(): int(metrics.redis_up)})
    yield _gauge("fleetline_fleet_time_seconds", "The fleet clock (fleet seconds).", [], {(): metrics.fleet_time_s})
    if metrics.last_tick_age_s is not None:
        yield _gauge(
            "fleetline_cycle_last_tick_age_seconds",
            "Wall seconds since the fleet clock last moved.",
            [],
            {(): metrics.last_tick_age_s},
        )


def _counters(metrics: FleetMetrics) -> Iterator[Metric]:
    yield _counter("fleetline_cycle_ticks", "Scheduling cycles run.", [], {(): metrics.ticks})
    yield _counter("fleetline_job_starts", "Job starts (restarts included).", ["team"], metrics.starts)
    yield _counter("fleetline_preemptions", "Jobs evicted by preemption.", ["team"], metrics.preemptions)
    yield _counter("fleetline_failures", "Node failures (incidents).", ["kind"], metrics.failures)
    yield _counter(
        "fleetline_lost_gpu_hours",
        "GPU-hours of work rolled back to checkpoints (preemptions and failures), from the usage ledger.",
        ["team", "accelerator"],
        metrics.lost_gpu_hours,
    )
    yield _counter(
        "fleetline_failure_lost_gpu_hours",
        "GPU-hours lost to node failures: stall until detection plus work since the checkpoint.",
        ["kind"],
        metrics.failure_lost_gpu_hours,
    )


def _incident_family(name: str, documentation: str, histograms: tuple[IncidentHistogram, ...]) -> Metric:
    family = HistogramMetricFamily(name, documentation, labels=["kind"])
    for histogram in histograms:
        family.add_metric([histogram.kind], list(histogram.buckets), histogram.sum_s)
    return family


def _histograms(metrics: FleetMetrics) -> Iterator[Metric]:
    steps = HistogramMetricFamily(
        "fleetline_cycle_step_duration_seconds",
        "Wall seconds per step of a scheduling cycle (lock, snapshot, engine, apply, commit_publish, total).",
        labels=["step"],
    )
    for step in metrics.cycle_steps:
        steps.add_metric([step.step], list(step.buckets), step.sum_s)
    yield steps
    yield _incident_family(
        "fleetline_failure_detection_seconds", "Fleet seconds from a failure to its detection.", metrics.detection
    )
    yield _incident_family(
        "fleetline_failure_recovery_seconds",
        "Fleet seconds from a failure to its gangs computing again.",
        metrics.recovery,
    )
