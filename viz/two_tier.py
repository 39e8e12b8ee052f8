"""The two-tier hit-rate surface: token hit rate over device capacity x host capacity.

A pure function from :class:`teaching.traces.two_tier.Surface` to a Plotly heatmap; each cell says
its hit rate and how much of it the host tier supplied.
"""

from __future__ import annotations

import plotly.graph_objects as go

from teaching.traces.loader import TRACE_BLOCK_SIZE
from teaching.traces.two_tier import Surface
from viz.theme import base_layout


def tokens_label(blocks: int) -> str:
    tokens = blocks * TRACE_BLOCK_SIZE
    return f"{tokens / 1e6:.1f}M" if tokens >= 10**6 else f"{tokens / 1e3:.0f}k" if tokens else "none"


def surface_figure(surface: Surface, title: str | None = "Hit rate with a second tier") -> go.Figure:
    """Rows: host tier size; columns: device pool size (tokens); colour and text: token hit rate (%)."""
    rates = [[100 * r for r in row] for row in surface.hit_rates()]
    text = [[f"{100 * c.token_hit_rate:.1f}%<br>{100 * c.host_share:.0f}% host" if c.host_hit_tokens
             else f"{100 * c.token_hit_rate:.1f}%" for c in row] for row in surface.results]
    fig = go.Figure(go.Heatmap(
        z=rates, x=[tokens_label(d) for d in surface.device_blocks], y=[tokens_label(h) for h in surface.host_blocks],
        text=text, texttemplate="%{text}", colorscale="Blues", colorbar=dict(title="hit %"),
        hovertemplate="device %{x} tokens, host %{y} tokens: %{z:.1f}% of prompt tokens cached<extra></extra>",
    ))
    fig.update_layout(**base_layout(title=title))
    fig.update_xaxes(title="device pool (tokens)", type="category")
    fig.update_yaxes(title="host tier (tokens)", type="category")
    return fig
