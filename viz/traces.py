"""Trace figures: the miss-ratio curve, the cache along the trace, and routers compared.

Pure functions from replay results (``teaching.traces``) to Plotly figures.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from teaching.traces.curve import DEFAULT_MAX_TOKENS, DEFAULT_MIN_TOKENS, Curve
from teaching.traces.policies import POLICIES
from teaching.traces.replay import ReplayResult
from teaching.traces.routing import ROUTERS
from viz.theme import STATE_COLORS, base_layout

#: One colour per policy; the optimum is dashed (it needs the future, no engine can run it).
POLICY_STYLE: dict[str, dict[str, object]] = {
    "vllm": dict(color=STATE_COLORS["hit"], dash="solid"),
    "classic": dict(color=STATE_COLORS["cached_free"], dash="solid"),
    "radix": dict(color=STATE_COLORS["in_use"], dash="dot"),
    "belady": dict(color=STATE_COLORS["computed"], dash="dash"),
}
CEILING_COLOR = STATE_COLORS["null"]


def miss_ratio_figure(curve: Curve, title: str | None = "Hit rate against cache capacity") -> go.Figure:
    """Token hit rate (%) per policy over capacity in tokens (log x), with the unbounded ceiling."""
    fig = go.Figure()
    tokens = [blocks * 512 for blocks in curve.capacities]
    for policy, results in curve.results.items():
        style = POLICY_STYLE.get(policy, {})
        fig.add_trace(go.Scatter(
            x=tokens, y=[100 * r.total.token_hit_rate for r in results], name=POLICIES.get(policy, policy),
            mode="lines+markers", line=dict(width=3, **style), marker=dict(size=8),
            customdata=[[r.total.hit_blocks, r.total.blocks, r.total.rejected] for r in results],
            hovertemplate="%{x:,} tokens: %{y:.1f}% of prompt tokens hit<br>%{customdata[0]:,} of %{customdata[1]:,} "
                          "blocks; %{customdata[2]} requests too big for the pool<extra>%{fullData.name}</extra>",
        ))
    ceiling = 100 * curve.ceiling.total.token_hit_rate
    fig.add_hline(y=ceiling, line=dict(color=CEILING_COLOR, dash="dot", width=2),
                  annotation_text=f"unbounded cache: {ceiling:.1f}%", annotation_position="top left")
    lo = min([DEFAULT_MIN_TOKENS, *tokens])
    hi = max([DEFAULT_MAX_TOKENS, *tokens])
    fig.update_xaxes(type="log", range=[math.log10(lo) - 0.1, math.log10(hi) + 0.1], title_text="cache capacity (tokens)",
                     gridcolor="#eceff1", exponentformat="power")
    fig.update_yaxes(title_text="% of prompt tokens from the cache", range=[0, max(5.0, ceiling * 1.15)],
                     gridcolor="#eceff1")
    fig.update_layout(**base_layout(
        title=dict(text=title, x=0.01, xanchor="left") if title else None, showlegend=True,
        legend=dict(orientation="h", y=-0.22, x=0), height=480, margin=dict(l=70, r=20, t=60 if title else 20, b=110),
    ))
    return fig


def timeseries_figure(results: Mapping[str, ReplayResult], title: str | None = "Along the trace") -> go.Figure:
    """Two panels over request number: windowed hit rate, and blocks held by requests / cached."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.1,
                        subplot_titles=("Token hit rate over the last requests", "Pool: cached blocks (solid), "
                                        "held by running requests (dotted)"))
    for policy, result in results.items():
        style = POLICY_STYLE.get(policy, {})
        x = [p.request for p in result.series]
        name = POLICIES.get(policy, policy)
        fig.add_trace(go.Scatter(x=x, y=[100 * p.hit_rate for p in result.series], name=name, legendgroup=policy,
                                 line=dict(width=2, **style), hovertemplate="request %{x}: %{y:.1f}%<extra>"
                                 + name + "</extra>"), row=1, col=1)
        fig.add_trace(go.Scatter(x=x, y=[100 * p.cached for p in result.series], name=name, legendgroup=policy,
                                 showlegend=False, line=dict(width=2, color=style.get("color")),
                                 hovertemplate="request %{x}: %{y:.0f}% of blocks cached<extra>" + name + "</extra>"),
                      row=2, col=1)
        fig.add_trace(go.Scatter(x=x, y=[100 * p.usage for p in result.series], name=name, legendgroup=policy,
                                 showlegend=False, line=dict(width=1, dash="dot", color=style.get("color")),
                                 hovertemplate="request %{x}: %{y:.0f}% of blocks in use<extra>" + name + "</extra>"),
                      row=2, col=1)
    fig.update_yaxes(title_text="% hit", range=[0, 100], gridcolor="#eceff1", row=1, col=1)
    fig.update_yaxes(title_text="% of pool", range=[0, 105], gridcolor="#eceff1", row=2, col=1)
    fig.update_xaxes(title_text="request (arrival order)", row=2, col=1)
    fig.update_layout(**base_layout(
        title=dict(text=title, x=0.01, xanchor="left") if title else None, showlegend=True,
        legend=dict(orientation="h", y=-0.15, x=0), height=560, margin=dict(l=70, r=20, t=90 if title else 50, b=90),
    ))
    return fig


def routing_figure(results: Mapping[str, ReplayResult], title: str | None = "Routers compared") -> go.Figure:
    """Per router: token hit rate, and load imbalance (max / mean prefill tokens computed per replica)."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.14,
                        subplot_titles=("Prompt tokens from the cache", "Busiest replica's prefill work / mean"))
    names = list(results)
    rates = [100 * results[n].total.token_hit_rate for n in names]
    balance = [results[n].load_balance()["computed_tokens_max_over_mean"] for n in names]
    fig.add_trace(go.Bar(x=names, y=rates, marker_color=STATE_COLORS["hit"], text=[f"{r:.1f}%" for r in rates],
                         textposition="outside", cliponaxis=False,
                         hovertext=[ROUTERS.get(n, n) for n in names], hovertemplate="%{x} (%{hovertext}): %{y:.1f}%"
                         "<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Bar(x=names, y=balance, marker_color=STATE_COLORS["evicted"], text=[f"{b:.2f}×" for b in balance],
                         textposition="outside", cliponaxis=False,
                         hovertemplate="%{x}: busiest replica does %{y:.2f}× the mean<extra></extra>"), row=1, col=2)
    fig.update_yaxes(title_text="% hit", range=[0, max(rates + [10]) * 1.25], gridcolor="#eceff1", row=1, col=1)
    fig.update_yaxes(title_text="max / mean (1 = even)", range=[0, max(balance + [1.0]) * 1.25], gridcolor="#eceff1",
                     row=1, col=2)
    fig.update_layout(**base_layout(
        title=dict(text=title, x=0.01, xanchor="left") if title else None, height=420,
        margin=dict(l=70, r=20, t=100 if title else 60, b=60), bargap=0.35,
    ))
    return fig
