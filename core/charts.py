"""Plain data in, Plotly figures out (as JSON for the browser). Never touches the ORM."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

from core.fleet_share import SharePoint as SharePoint
from core.fleet_share import share_summary_text as share_summary_text

SERVING_COLOUR = "#d9822b"
TRAINING_COLOUR = "#2f6fde"
BATCH_COLOUR = "#8a63d2"
IDLE_COLOUR = "#c9ced8"


def _layout(title: str, y_title: str, **extra: object) -> dict[str, object]:
    return {
        # Left-aligned with room above, so a long title is never cut by the plot's edge.
        "title": {"text": title, "font": {"size": 14}, "x": 0.01, "xanchor": "left", "automargin": True},
        "margin": {"l": 50, "r": 60, "t": 44, "b": 40},
        "height": 290,
        "xaxis": {"title": {"text": "fleet time (h)"}, "automargin": True},
        "yaxis": {"title": {"text": y_title}, "rangemode": "tozero", "automargin": True},
        "legend": {"orientation": "h", "y": -0.3, "yanchor": "top"},
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "autosize": True,
        "template": "none",
        **extra,
    }


# Templates as Plotly writes them into a figure's layout, by name: read once per process.
_TEMPLATES: dict[str, Any] = {}


def figure_json(traces: Sequence[dict[str, Any]], layout: dict[str, Any]) -> str:
    """The figure's JSON, as ``figure_json_by_plotly`` gives it (``tests/portal/test_chart_json.py``
    holds the two to one answer) but written straight from the data: Plotly validates every value
    of every trace, which was about half of the dashboard's CPU. Each trace names its ``type``."""
    name = layout.get("template")
    if isinstance(name, str):
        if name not in _TEMPLATES:
            _TEMPLATES[name] = pio.templates[name].to_plotly_json()
        layout = {**layout, "template": _TEMPLATES[name]}
    return json.dumps({"data": list(traces), "layout": layout})


def figure_json_by_plotly(traces: Sequence[dict[str, Any]], layout: dict[str, Any]) -> str:
    """The same figure made and written by Plotly: the definition ``figure_json`` keeps to."""
    return str(go.Figure(data=list(traces), layout=layout).to_json())


def count_tick_step(largest: int, ticks: int = 5) -> int:
    """A whole tick step that shows about ``ticks`` ticks up to ``largest``: 1, 2, 5, 10, 20, ..."""
    step = 1
    while largest / step > ticks:
        step = step * 5 // 2 if str(step).startswith("2") else step * 2
    return step


def share_figure(points: Sequence[SharePoint]) -> str:
    """Serving vs training (vs batch) GPUs over time, stacked, with idle capacity on top."""
    hours = [p.sim_time_s / 3600 for p in points]
    traces = [
        {
            "type": "scatter",
            "x": hours,
            "y": values,
            "name": name,
            "stackgroup": "gpus",
            "mode": "lines",
            "line": {"width": 0.5, "color": colour},
        }
        for name, values, colour in (
            ("serving", [p.serving_gpus for p in points], SERVING_COLOUR),
            ("training", [p.training_gpus for p in points], TRAINING_COLOUR),
            ("batch", [p.batch_gpus for p in points], BATCH_COLOUR),
            ("idle", [p.idle_gpus for p in points], IDLE_COLOUR),
        )
    ]
    return figure_json(traces, _layout("Serving vs training share", "GPUs"))


def utilisation_figure(points: Sequence[SharePoint]) -> str:
    """Utilisation (GPUs held of all installed), and the queue depth on a second axis."""
    hours = [p.sim_time_s / 3600 for p in points]
    utilisation = [100 * p.utilisation for p in points]
    layout = _layout(
        "Utilisation and queue",
        "utilisation (%)",
        yaxis2={
            "title": {"text": "pending jobs"},
            "overlaying": "y",
            "side": "right",
            "rangemode": "tozero",
            "automargin": True,
            # Jobs are whole: integer ticks, spaced so that about five show.
            "tickformat": ",d",
            "dtick": count_tick_step(max((p.pending_jobs for p in points), default=0)),
        },
    )
    traces = [
        {
            "type": "scatter",
            "x": hours,
            "y": utilisation,
            "name": "utilisation %",
            "mode": "lines",
            "line": {"color": "#2e9d5b"},
        },
        {
            "type": "scatter",
            "x": hours,
            "y": [p.pending_jobs for p in points],
            "name": "pending jobs",
            "mode": "lines",
            "yaxis": "y2",
            "line": {"color": "#c8413b", "dash": "dot"},
        },
    ]
    return figure_json(traces, layout)


KIND_COLOURS = {"serving": SERVING_COLOUR, "training": TRAINING_COLOUR, "batch": BATCH_COLOUR}


@dataclass(frozen=True, slots=True)
class KindSeries:
    """Mean GPUs per job kind over consecutive fleet-time buckets (starts in seconds)."""

    starts_s: Sequence[float]
    gpus_by_kind: Sequence[dict[str, float]]


def team_usage_figure(series: KindSeries, *, title: str) -> str:
    """A team's GPUs in use over time, stacked by job kind."""
    hours = [start / 3600 for start in series.starts_s]
    traces = []
    for kind, colour in KIND_COLOURS.items():
        values = [round(bucket.get(kind, 0.0), 2) for bucket in series.gpus_by_kind]
        if any(values):
            traces.append(
                {
                    "type": "scatter",
                    "x": hours,
                    "y": values,
                    "name": kind,
                    "stackgroup": "gpus",
                    "mode": "lines",
                    "line": {"width": 0.5, "color": colour},
                }
            )
    layout = _layout(title, "GPUs in use", yaxis={"title": {"text": "GPUs"}, "rangemode": "tozero"})
    return figure_json(traces, layout)


def usage_summary_text(series: KindSeries) -> str:
    """The figure in one sentence, for readers who cannot see it."""
    if not series.gpus_by_kind:
        return "No usage recorded yet."
    totals = [sum(bucket.values()) for bucket in series.gpus_by_kind]
    hours = (series.starts_s[-1] - series.starts_s[0]) / 3600 if len(series.starts_s) > 1 else 0
    return (
        f"Over the last {hours:.0f} fleet hours the team used {sum(totals) / len(totals):.1f} GPUs on average, "
        f"{max(totals):.1f} at most; now {totals[-1]:.1f}."
    )


@dataclass(frozen=True, slots=True)
class TeamShare:
    label: str
    gpus: int
    own: bool  # the viewer's team (named); other teams may be merged under one label


def team_share_figure(shares: Sequence[TeamShare]) -> str:
    """GPUs in use now per team, largest first; the viewer's own teams stand out."""
    ordered = sorted(shares, key=lambda share: -share.gpus)
    layout = _layout(
        "GPUs in use per team",
        "GPUs",
        xaxis={"title": {"text": ""}, "automargin": True},
        yaxis={"title": {"text": "GPUs"}, "rangemode": "tozero", "tickformat": ",d", "automargin": True},
        showlegend=False,
    )
    bar = {
        "type": "bar",
        "x": [share.label for share in ordered],
        "y": [share.gpus for share in ordered],
        "marker": {"color": [TRAINING_COLOUR if share.own else IDLE_COLOUR for share in ordered]},
        "name": "GPUs in use",
    }
    return figure_json([bar], layout)


def team_share_summary_text(shares: Sequence[TeamShare]) -> str:
    if not shares:
        return "No team has GPUs in use."
    return "GPUs in use now: " + ", ".join(f"{s.label} {s.gpus}" for s in sorted(shares, key=lambda s: -s.gpus)) + "."
