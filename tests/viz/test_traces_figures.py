"""Trace figures are pure functions of replay results: check what they draw."""

from __future__ import annotations

import pytest

from teaching.traces.curve import miss_ratio_curve
from teaching.traces.loader import load_trace
from teaching.traces.replay import PreparedTrace, replay
from teaching.traces.sources import SAMPLE_TRACE
from viz.traces import miss_ratio_figure, routing_figure, timeseries_figure


@pytest.fixture(scope="module")
def prepared() -> PreparedTrace:
    return PreparedTrace(load_trace(SAMPLE_TRACE).head(200))


def test_miss_ratio_curve_log_axis_policies_and_ceiling(prepared) -> None:
    curve = miss_ratio_curve(prepared, ["vllm", "belady"], [20, 200, 2000])
    fig = miss_ratio_figure(curve)
    assert fig.layout.xaxis.type == "log"
    assert fig.layout.xaxis.range[0] < 4 < 8 < fig.layout.xaxis.range[1]  # 10^4 .. 10^8 tokens shown
    assert [t.name for t in fig.data] == ["vLLM 0.33 LRU", "Belady optimum (leaves)"]
    assert list(fig.data[1].x) == [20 * 512, 200 * 512, 2000 * 512]
    assert list(fig.data[1].y) == [100 * r.total.token_hit_rate for r in curve.results["belady"]]
    ceiling = 100 * curve.ceiling.total.token_hit_rate
    assert fig.layout.shapes[0].y0 == ceiling and f"{ceiling:.1f}%" in fig.layout.annotations[0].text


def test_time_series_has_hit_rate_cached_and_usage_per_policy(prepared) -> None:
    results = {p: replay(prepared, p, 300) for p in ("vllm", "radix")}
    fig = timeseries_figure(results)
    assert len(fig.data) == 6
    series = results["vllm"].series
    assert list(fig.data[0].x) == [p.request for p in series] and series[-1].request == 200
    assert all(0 <= y <= 100 for trace in fig.data for y in trace.y)


def test_routing_figure_bars(prepared) -> None:
    runs = {r: replay(prepared, "vllm", 300, replicas=2, router=r) for r in ("round-robin", "prefix")}
    fig = routing_figure(runs)
    assert list(fig.data[0].x) == ["round-robin", "prefix"]
    assert fig.data[1].y[1] == pytest.approx(runs["prefix"].load_balance()["computed_tokens_max_over_mean"])
