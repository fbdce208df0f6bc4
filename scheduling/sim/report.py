"""A self-contained HTML report (plotly.js inlined, no CDN): one line per policy.

Utilisation and queue length over time (sampled), JCT CDF, and per-team share vs entitlement.
Plotly is imported here only, so the simulator itself needs nothing beyond the standard library.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from .runner import Comparison

MAX_CDF_POINTS = 400


def build_html(comparison: Comparison) -> str:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    figure = make_subplots(
        rows=2,
        cols=2,
        subplot_titles=("Utilisation", "Queue length (jobs)", "JCT CDF", "Team share of the fleet vs entitlement"),
    )
    for result in comparison.results:
        days = [t / 86400.0 for t in result.series.times_s]
        figure.add_trace(go.Scatter(x=days, y=result.series.utilisation, name=f"{result.policy} util"), row=1, col=1)
        figure.add_trace(go.Scatter(x=days, y=result.series.queue_length, name=f"{result.policy} queue"), row=1, col=2)
        jcts = result.jct_s
        step = max(1, len(jcts) // MAX_CDF_POINTS)
        xs = [jcts[i] / 3600.0 for i in range(0, len(jcts), step)]
        ys = [(i + 1) / len(jcts) for i in range(0, len(jcts), step)]
        figure.add_trace(go.Scatter(x=xs, y=ys, name=f"{result.policy} JCT"), row=2, col=1)
        capacity_h = result.metrics["capacity_gpus"] * result.metrics["window_s"] / 3600.0 or 1.0
        teams = [share.team for share in result.team_shares]
        figure.add_trace(
            go.Bar(x=teams, y=[s.used_gpu_h / capacity_h for s in result.team_shares], name=f"{result.policy} used"),
            row=2,
            col=2,
        )
    first = comparison.results[0] if comparison.results else None
    if first is not None:
        capacity_h = first.metrics["capacity_gpus"] * first.metrics["window_s"] / 3600.0 or 1.0
        figure.add_trace(
            go.Scatter(
                x=[s.team for s in first.team_shares],
                y=[s.entitled_gpu_h / capacity_h for s in first.team_shares],
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
    title = f"Fleet simulation: {comparison.meta.get('fleet')} ({comparison.meta.get('jobs')} jobs)"
    figure.update_layout(title=title, height=900, barmode="group")
    # A document of its own (a language and a title for screen readers), around Plotly's figure.
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8"><title>{escape(title)}</title></head>\n'
        f"<body>\n{figure.to_html(include_plotlyjs=True, full_html=False)}\n</body>\n</html>\n"
    )


def write_html(comparison: Comparison, path: str | Path) -> None:
    Path(path).write_text(build_html(comparison), encoding="utf-8")
