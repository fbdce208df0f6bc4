"""An HTML report: one line per policy.

Utilisation and queue length over time, JCT CDF, and per-team share vs entitlement. Each line
holds at most `MAX_POINTS` points (a long replay's samples are averaged in equal buckets) and
numbers rounded to what a chart can show, so the report's size does not grow with the replay.
The CLI's report is self-contained (plotly.js inlined, no CDN); the portal's loads plotly.js from
the site, where the browser keeps it. Plotly is imported here only, so the simulator itself needs
nothing beyond the standard library.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from .metric_catalogue import METRICS
from .runner import Comparison

MAX_POINTS = 400


def thin(xs: Sequence[float], ys: Sequence[float], *, max_points: int = MAX_POINTS) -> tuple[list[float], list[float]]:
    """At most `max_points` points: consecutive samples averaged in equal buckets (a bucket's x is
    its first sample's), so a line keeps its area; fewer samples pass unchanged."""
    if len(xs) <= max_points:
        return list(xs), list(ys)
    size = -(-len(xs) // max_points)  # ceiling: every bucket but the last holds `size` samples
    thinned_x, thinned_y = [], []
    for start in range(0, len(xs), size):
        bucket = ys[start : start + size]
        thinned_x.append(xs[start])
        thinned_y.append(sum(bucket) / len(bucket))
    return thinned_x, thinned_y


def _rounded(values: Sequence[float], digits: int) -> list[float]:
    return [round(value, digits) for value in values]


def _cdf(jcts_s: Sequence[float]) -> tuple[list[float], list[float]]:
    """The JCT CDF (hours, fraction of jobs) at at most `MAX_POINTS` jobs, evenly spaced by rank."""
    step = max(1, -(-len(jcts_s) // MAX_POINTS))
    ranks = range(0, len(jcts_s), step)
    return (
        _rounded([jcts_s[i] / 3600.0 for i in ranks], 3),
        _rounded([(i + 1) / len(jcts_s) for i in ranks], 4),
    )


def build_figure(comparison: Comparison) -> Any:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    utilisation = METRICS["utilisation"]
    figure = make_subplots(
        rows=2,
        cols=2,
        subplot_titles=(utilisation.title, "Queue length (jobs)", "JCT CDF", "Team share of the fleet vs entitlement"),
    )
    for result in comparison.results:
        days = [t / 86400.0 for t in result.series.times_s]
        x, y = thin(days, [u * utilisation.scale for u in result.series.utilisation])
        figure.add_trace(go.Scatter(x=_rounded(x, 4), y=_rounded(y, 2), name=f"{result.policy} util"), row=1, col=1)
        x, y = thin(days, [float(q) for q in result.series.queue_length])
        figure.add_trace(go.Scatter(x=_rounded(x, 4), y=_rounded(y, 1), name=f"{result.policy} queue"), row=1, col=2)
        xs, ys = _cdf(result.jct_s)
        figure.add_trace(go.Scatter(x=xs, y=ys, name=f"{result.policy} JCT"), row=2, col=1)
        capacity_h = result.metrics["capacity_gpus"] * result.metrics["window_s"] / 3600.0 or 1.0
        teams = [share.team for share in result.team_shares]
        figure.add_trace(
            go.Bar(
                x=teams,
                y=_rounded([s.used_gpu_h / capacity_h for s in result.team_shares], 4),
                name=f"{result.policy} used",
            ),
            row=2,
            col=2,
        )
    first = comparison.results[0] if comparison.results else None
    if first is not None:
        capacity_h = first.metrics["capacity_gpus"] * first.metrics["window_s"] / 3600.0 or 1.0
        figure.add_trace(
            go.Scatter(
                x=[s.team for s in first.team_shares],
                y=_rounded([s.entitled_gpu_h / capacity_h for s in first.team_shares], 4),
                mode="markers",
                marker={"symbol": "line-ew-open", "size": 24},
                name="entitled (max-min fair, first policy)",
            ),
            row=2,
            col=2,
        )
    figure.update_xaxes(title_text="days", row=1, col=1)
    figure.update_xaxes(title_text="days", row=1, col=2)
    figure.update_xaxes(title_text="hours", type="log", row=2, col=1)
    figure.update_layout(title=report_title(comparison), height=900, barmode="group")
    return figure


def report_title(comparison: Comparison) -> str:
    return f"Fleet simulation: {comparison.meta.get('fleet')} ({comparison.meta.get('jobs')} jobs)"


def build_html(comparison: Comparison, *, plotly_js_url: str | None = None) -> str:
    """The report as one HTML document: plotly.js inlined (about 4.8 MB) unless `plotly_js_url`
    names where the browser loads it from."""
    figure = build_figure(comparison)
    title = report_title(comparison)
    chart = figure.to_html(include_plotlyjs=plotly_js_url or True, full_html=False)
    # A document of its own (a language and a title for screen readers), around Plotly's figure.
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8"><title>{escape(title)}</title></head>\n'
        f"<body>\n{chart}\n</body>\n</html>\n"
    )


def write_html(comparison: Comparison, path: str | Path) -> None:
    Path(path).write_text(build_html(comparison), encoding="utf-8")
