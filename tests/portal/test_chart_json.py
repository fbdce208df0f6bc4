"""Every chart written straight from its data (``core.charts.figure_json``) is the figure Plotly
makes and writes from the same traces and layout, with or without data."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from core import charts
from core.charts import KindSeries, SharePoint, TeamShare

POINTS = [SharePoint(60.0 * i, i % 7, 40 - i % 5, i % 3, 64 - i % 2, (i * 37) % 250, 64) for i in range(300)]
SERIES = KindSeries(
    starts_s=[3600.0 * i for i in range(24)],
    gpus_by_kind=[{"training": 7.123 * i, "serving": 2.5} if i % 4 else {} for i in range(24)],
)
SHARES = [TeamShare("Vision", 24, True), TeamShare("Language Models", 40, False), TeamShare("2 other teams", 3, False)]

CHARTS: list[tuple[str, Callable[[], str]]] = [
    ("share", lambda: charts.share_figure(POINTS)),
    ("share, no samples", lambda: charts.share_figure([])),
    ("utilisation", lambda: charts.utilisation_figure(POINTS)),
    ("utilisation, no samples", lambda: charts.utilisation_figure([])),
    ("team usage", lambda: charts.team_usage_figure(SERIES, title="Vision's GPUs")),
    ("team usage, none", lambda: charts.team_usage_figure(KindSeries([], []), title="Nothing")),
    ("team share", lambda: charts.team_share_figure(SHARES)),
    ("team share, none", lambda: charts.team_share_figure([])),
]


@pytest.mark.parametrize(("name", "chart"), CHARTS, ids=[name for name, _ in CHARTS])
def test_a_chart_written_from_its_data_is_the_figure_plotly_writes(
    name: str, chart: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    direct = json.loads(chart())
    monkeypatch.setattr(charts, "figure_json", charts.figure_json_by_plotly)
    by_plotly = json.loads(chart())

    assert direct == by_plotly
    assert direct["layout"]["template"]["data"]  # the template itself, as Plotly writes it
