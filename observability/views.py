"""``/metrics`` (Prometheus text format), ``/healthz`` (the process answers) and ``/readyz``
(database, Redis and a recent scheduling tick; 503 otherwise)."""

from __future__ import annotations

import os

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest, multiprocess

from observability.access import metrics_access_allowed
from observability.collector import FleetCollector
from observability.health import readiness_checks


def _process_registry() -> CollectorRegistry:
    """HTTP and database series of the web processes (django-prometheus). Several worker
    processes behind one port (``uvicorn --workers N``) each count their own requests, so with
    ``PROMETHEUS_MULTIPROC_DIR`` set they write them to files there and any of them reports the
    sum; a single process reports its own registry."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return registry
    return REGISTRY


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not metrics_access_allowed(request=request):
        response = HttpResponse("Metrics need a bearer token or an allowed network.\n", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    fleet = CollectorRegistry(auto_describe=False)
    fleet.register(FleetCollector())
    try:
        body = generate_latest(_process_registry()) + generate_latest(fleet)
    except DatabaseError:
        # Prometheus records the failed scrape (up == 0); /readyz says what is down.
        return HttpResponse("The database is unreachable.\n", status=503, content_type="text/plain")
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)


@never_cache
@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok\n", content_type="text/plain")


@never_cache
@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    checks = readiness_checks()
    ready = all(check.ok for check in checks)
    return JsonResponse(
        {
            "status": "ready" if ready else "not ready",
            "tick_max_age_s": settings.FLEETLINE_READY_TICK_MAX_AGE_S,
            "checks": {check.name: {"ok": check.ok, "detail": check.detail} for check in checks},
        },
        status=200 if ready else 503,
    )
