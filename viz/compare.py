"""Compare figures: the same workload under cache off / vLLM / classic, and TTFT on the real model.

Pure functions from plain records to Plotly bar charts; the colours come from
:mod:`viz.theme`'s series colours (settings, never a block state). :func:`policy_bars_html` draws
the three settings as plain HTML bars instead, so the page's first picture comes with the page
rather than after the browser has loaded Plotly.js.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from teaching.pages.compare import PolicyResult
from teaching.pages.ttft import TtftSample
from teaching.pages.ttft import speedup as ttft_speedup
from viz.theme import SERIES_COLORS, base_layout

#: One colour per setting, from the theme's series colours (never a block state's colour).
SETTING_COLORS: dict[str, str] = SERIES_COLORS
TTFT_COLORS: dict[bool, str] = {False: SERIES_COLORS["off"], True: SERIES_COLORS["vllm"]}


def policy_figure(results: Sequence[PolicyResult], title: str | None = "Same workload, three cache settings") -> go.Figure:
    """Two bar panels: token hit rate (%) and prefill tokens computed, one bar per setting."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.2,
                        subplot_titles=("Prompt tokens served from the cache", "Prefill tokens computed"))
    labels = [r.label for r in results]
    colors = [SETTING_COLORS.get(r.key, SERIES_COLORS["off"]) for r in results]
    fig.add_trace(go.Bar(
        name="hit rate", x=labels, y=[100 * r.hit_rate for r in results], marker_color=colors,
        text=[f"{100 * r.hit_rate:.0f}%" for r in results], textposition="outside", cliponaxis=False,
        customdata=[[r.hit_tokens, r.prompt_tokens] for r in results],
        hovertemplate="%{x}: %{customdata[0]} of %{customdata[1]} prompt tokens hit<extra></extra>",
    ), row=1, col=1)
    fig.add_trace(go.Bar(
        name="prefill computed", x=labels, y=[r.prefill_computed for r in results], marker_color=colors,
        text=[f"{r.prefill_computed:,}" for r in results], textposition="outside", cliponaxis=False,
        customdata=[[r.evictions] for r in results],
        hovertemplate="%{x}: %{y:,} tokens computed, %{customdata[0]} evictions<extra></extra>",
    ), row=1, col=2)
    top_rate = max([100 * r.hit_rate for r in results] + [10])
    top_tokens = max([r.prefill_computed for r in results] + [1])
    fig.update_yaxes(ticksuffix="%", range=[0, min(100, top_rate * 1.25) if top_rate < 80 else 110], row=1, col=1)
    fig.update_yaxes(range=[0, top_tokens * 1.2], row=1, col=2)
    fig.update_yaxes(gridcolor="#eceff1", automargin=True)
    fig.update_xaxes(automargin=True)
    fig.update_layout(**base_layout(
        title=dict(text=title, x=0.01, xanchor="left") if title else None,
        height=420, margin=dict(l=70, r=20, t=100 if title else 60, b=60), bargap=0.35,
    ))
    return fig


def policy_bars_html(results: Sequence[PolicyResult], title: str = "Same workload, three cache settings") -> str:
    """The two panels of :func:`policy_figure` as HTML bars: prompt tokens served from the cache (%) and
    prefill tokens computed, one labelled bar per setting, its value written beside it; details on hover."""
    top_tokens = max([r.prefill_computed for r in results] + [1])

    def panel(heading: str, rows: list[tuple[PolicyResult, float, float, str, str]]) -> str:
        bars = "".join(
            f"<div data-setting='{r.key}' data-value='{value:g}' title='{escape(hover)}' style='display:grid;"
            "grid-template-columns:9.5em minmax(0,1fr) 4.5em;gap:8px;align-items:center;margin:6px 0'>"
            f"<span style='overflow-wrap:anywhere'>{escape(r.label)}</span>"
            f"<span style='display:block;height:22px;width:{share:.1%};min-width:2px;border-radius:3px;"
            f"background:{SETTING_COLORS.get(r.key, SERIES_COLORS['off'])}'></span>"
            f"<span style='font-weight:700;white-space:nowrap'>{text}</span></div>"
            for r, value, share, text, hover in rows
        )
        return f"<div style='min-width:0'><div style='font-weight:600;margin-bottom:2px'>{escape(heading)}</div>{bars}</div>"

    rates = [(r, 100 * r.hit_rate, r.hit_rate, f"{100 * r.hit_rate:.0f}%",
              f"{r.label}: {r.hit_tokens} of {r.prompt_tokens} prompt tokens hit") for r in results]
    computed = [(r, float(r.prefill_computed), r.prefill_computed / top_tokens, f"{r.prefill_computed:,}",
                 f"{r.label}: {r.prefill_computed:,} tokens computed, {r.evictions} evictions") for r in results]
    return (
        "<div class='pl-bars' style='font-size:15px;color:#212121;margin-bottom:10px'>"
        f"<div style='font-weight:700;font-size:17px;margin-bottom:6px'>{escape(title)}</div>"
        "<div style='display:grid;grid-template-columns:repeat(auto-fit,minmax(300px,1fr));gap:10px 28px'>"
        + panel("Prompt tokens served from the cache", rates) + panel("Prefill tokens computed", computed)
        + "</div></div>"
    )


def ttft_figure(samples: Sequence[TtftSample], title: str | None = "Time to first token on the real model") -> go.Figure:
    """Grouped bars per request: caching off (grey) next to caching on (green), median ms with the rounds' spread."""
    fig = go.Figure()
    for caching in (False, True):
        rows = [s for s in samples if s.caching == caching]
        fig.add_trace(go.Bar(
            name="caching on" if caching else "caching off",
            x=[f"request {s.request}" for s in rows], y=[1000 * s.ttft_s for s in rows],
            marker_color=TTFT_COLORS[caching],
            text=[f"{1000 * s.ttft_s:.0f} ms" for s in rows], textposition="outside", cliponaxis=False,
            # The spread of the rounds: a whisker from the fastest to the slowest reading.
            error_y=dict(type="data", symmetric=False, color="#37474f", thickness=1.5, width=6,
                         array=[1000 * (s.high_s - s.ttft_s) for s in rows],
                         arrayminus=[1000 * (s.ttft_s - s.low_s) for s in rows]),
            customdata=[[s.cached_tokens, s.prompt_tokens, 1000 * s.low_s, 1000 * s.high_s, len(s.runs_s) or 1]
                        for s in rows],
            hovertemplate=("%{x}: median %{y:.0f} ms (%{customdata[2]:.0f}-%{customdata[3]:.0f} ms over "
                           "%{customdata[4]} rounds), %{customdata[0]} of %{customdata[1]} prompt tokens cached<extra></extra>"),
        ))
    top = max([1000 * s.high_s for s in samples] + [1])
    fig.update_yaxes(title_text="TTFT (ms)", range=[0, top * 1.2], gridcolor="#eceff1", automargin=True)
    fig.update_xaxes(automargin=True)
    fig.update_layout(**base_layout(
        title=dict(text=title, x=0.01, xanchor="left") if title else None,
        barmode="group", showlegend=True, legend=dict(orientation="h", x=0, y=1.0, yanchor="bottom"),
        height=400, margin=dict(l=70, r=20, t=100 if title else 50, b=50), bargap=0.3,
    ))
    return fig


def speedup(samples: Sequence[TtftSample]) -> float | None:
    """The median round's TTFT ratio, caching off / on (see :func:`teaching.pages.ttft.speedup`)."""
    result = ttft_speedup(samples)
    return None if result is None else result.median
