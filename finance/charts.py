"""The report's figures: plain report data in, Plotly figures out (JSON for the browser).
Never touches the ORM."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import plotly.graph_objects as go

from core.charts import BATCH_COLOUR, SERVING_COLOUR, TRAINING_COLOUR
from finance.selectors import DayPoint, TeamRow

PALETTE = ("#2f6fde", "#d9822b", "#3a9d6b", "#8a63d2", "#c0392b", "#5c6b7a", "#b8860b", "#1f9bb0")


def _layout(title: str, y_title: str, x_title: str, **extra: object) -> dict[str, object]:
    return {
        "title": {"text": title, "font": {"size": 14}},
        "margin": {"l": 60, "r": 30, "t": 36, "b": 40},
        "height": 300,
        "xaxis": {"title": {"text": x_title}},
        "yaxis": {"title": {"text": y_title}, "rangemode": "tozero"},
        "legend": {"orientation": "h", "y": -0.3, "yanchor": "top"},
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "template": "none",
        **extra,
    }


def gpu_hours_by_team_figure(points: Sequence[DayPoint]) -> str:
    """GPU-hours used per fleet calendar day, stacked by team."""
    by_team: dict[str, dict[str, float]] = defaultdict(dict)
    for point in points:
        by_team[point.team][point.day.isoformat()] = point.used_gpu_h
    days = sorted({point.day.isoformat() for point in points})
    figure = go.Figure(layout=_layout("GPU-hours per team", "GPU-hours", "fleet calendar day", barmode="stack"))
    for n, (team, values) in enumerate(sorted(by_team.items())):
        figure.add_trace(
            go.Bar(x=days, y=[round(values.get(d, 0.0), 2) for d in days], name=team, marker_color=PALETTE[n % 8])
        )
    return figure.to_json()


def cost_by_team_figure(rows: Sequence[TeamRow], currency: str) -> str:
    figure = go.Figure(layout=_layout("Cost per team", currency, "team"))
    figure.add_trace(
        go.Bar(
            x=[row.team for row in rows],
            y=[float(row.cost) for row in rows],
            name="cost",
            marker_color=[PALETTE[n % 8] for n in range(len(rows))],
        )
    )
    return figure.to_json()


def serving_training_figure(rows: Sequence[TeamRow]) -> str:
    """Serving vs training (vs batch) share of the GPU-hours used."""
    values = [sum(getattr(row, f"{kind}_gpu_h") for row in rows) for kind in ("serving", "training", "batch")]
    figure = go.Figure(layout=_layout("Serving vs training share", "", ""))
    figure.add_trace(
        go.Pie(
            labels=["serving", "training", "batch"],
            values=[round(v, 2) for v in values],
            marker={"colors": [SERVING_COLOUR, TRAINING_COLOUR, BATCH_COLOUR]},
            hole=0.4,
            sort=False,
        )
    )
    return figure.to_json()
