"""Render the README's trace figures: docs/traces-curve.png and docs/traces-series.png.

    python -m scripts.trace_figures [FILE]     # default: the full conversation trace, else the sample

Replays every policy at every capacity (a minute or more), draws the figures with
``viz.traces`` and photographs them in Debian's chromium (no image-export package needed).
Prints the curve as a Markdown table for the README.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import plotly.graph_objects as go

from teaching.traces.curve import miss_ratio_curve
from teaching.traces.loader import TRACE_BLOCK_SIZE, load_trace
from teaching.traces.policies import POLICIES
from teaching.traces.replay import PreparedTrace
from teaching.traces.sources import CONVERSATION, SAMPLE_TRACE, shared_traces_dir
from tests.e2e.harness import launch_chromium
from viz.traces import miss_ratio_figure, timeseries_figure

ROOT = Path(__file__).resolve().parents[1]


def photograph(figures: dict[str, go.Figure], width: int = 1000) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright, tempfile.TemporaryDirectory() as tmp:
        browser = launch_chromium(playwright)
        page = browser.new_page(viewport={"width": width, "height": 600})
        for name, fig in figures.items():
            html = Path(tmp) / f"{name}.html"
            fig.update_layout(width=width)
            fig.write_html(html, include_plotlyjs=True, full_html=True, config={"displayModeBar": False})
            page.goto(html.as_uri())
            page.locator(".js-plotly-plot").wait_for()
            page.wait_for_timeout(500)
            page.locator(".js-plotly-plot").screenshot(path=str(ROOT / "docs" / f"{name}.png"))
        browser.close()


def main() -> int:
    full = shared_traces_dir() / CONVERSATION
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else full if full.exists() else SAMPLE_TRACE
    prepared = PreparedTrace(load_trace(path))
    curve = miss_ratio_curve(prepared, progress=lambda f, m: print(f"[{f:4.0%}] {m}", file=sys.stderr, flush=True))
    title = f"{path.stem}: {len(prepared.trace):,} requests through the real KVCacheManager"
    middle = len(curve.capacities) // 2
    photograph({
        "traces-curve": miss_ratio_figure(curve, title=title),
        "traces-series": timeseries_figure({p: rs[middle] for p, rs in curve.results.items()},
                                           title=f"Along the trace, {curve.capacities[middle] * TRACE_BLOCK_SIZE:,} "
                                                 "tokens of cache"),
    })
    print("| capacity (tokens) | " + " | ".join(POLICIES.values()) + " |")
    print("|---:|" + "---:|" * len(POLICIES))
    for i, blocks in enumerate(curve.capacities):
        print(f"| {blocks * TRACE_BLOCK_SIZE:,} | "
              + " | ".join(f"{curve.results[p][i].total.token_hit_rate:.1%}" for p in POLICIES) + " |")
    print(f"| unbounded | {curve.ceiling.total.token_hit_rate:.1%} (every policy) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
