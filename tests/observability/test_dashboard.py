"""The Grafana dashboard in docs/grafana asks only for series that /metrics serves."""

from __future__ import annotations

import json
import re
from pathlib import Path

from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from tests.observability.conftest import scrape

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "fleetline.json"
SERIES = re.compile(r"\b((?:fleetline|django)_[a-z_]+)")


def _expressions(panels: list[dict]) -> list[str]:
    found = []
    for panel in panels:
        found += [target["expr"] for target in panel.get("targets", [])]
        found += _expressions(panel.get("panels", []))
    return found


def test_every_series_the_dashboard_queries_is_served(client: Client, known_fleet: dict) -> None:
    client.get("/healthz")  # so that the HTTP series have a sample
    dashboard = json.loads(DASHBOARD.read_text())
    served = {name for name, _ in scrape(client)}
    # A labelled series that has seen nothing yet (database errors) is declared without samples.
    body = client.get("/metrics").content.decode()
    for family in text_string_to_metric_families(body):
        served |= {family.name, f"{family.name}_total"}
    wanted = {name for expr in _expressions(dashboard["panels"]) for name in SERIES.findall(expr)}
    for variable in dashboard["templating"]["list"]:
        wanted |= set(SERIES.findall(variable.get("definition", "")))
    assert wanted, "the dashboard queries nothing"
    assert sorted(wanted - served) == []
