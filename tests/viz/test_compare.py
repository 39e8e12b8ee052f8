"""viz.compare: bar charts from plain records, and the compare logic on the simulator."""

from __future__ import annotations

import re

from teaching.pages.compare import PolicyResult, TraceSpec, compare_scenario, compare_trace, generate_trace
from teaching.pages.ttft import TtftSample
from teaching.scenarios.library import BUILTIN_SCENARIOS
from viz.compare import SETTING_COLORS, TTFT_COLORS, policy_bars_html, policy_figure, speedup, ttft_figure
from viz.theme import STATE_COLORS

RESULTS = [
    PolicyResult("off", "caching off", 100, 0, 100, 0, 5),
    PolicyResult("vllm", "vLLM", 100, 60, 40, 3, 5),
    PolicyResult("classic", "classic", 100, 50, 50, 4, 5),
]


def test_policy_figure_bars_and_colours() -> None:
    fig = policy_figure(RESULTS)
    rate, computed = fig.data
    assert list(rate.x) == ["caching off", "vLLM", "classic"]
    assert list(rate.y) == [0, 60, 50] and list(rate.text) == ["0%", "60%", "50%"]
    assert list(computed.y) == [100, 40, 50]
    assert list(rate.marker.color) == [SETTING_COLORS["off"], SETTING_COLORS["vllm"], SETTING_COLORS["classic"]]
    assert not set(SETTING_COLORS.values()) & set(STATE_COLORS.values())  # settings never look like block states
    assert fig.layout.yaxis2.range[1] >= 100  # labels above the bars stay inside the axis


def test_policy_bars_html_values_widths_and_colours() -> None:
    html = policy_bars_html([*RESULTS[:2], PolicyResult("classic", "<b>classic</b>", 100, 50, 50, 4, 5)])
    rate_panel, computed_panel = html.split("Prefill tokens computed")
    assert re.findall(r"data-setting='(\w+)' data-value='([\d.]+)'", rate_panel) == [
        ("off", "0"), ("vllm", "60"), ("classic", "50")]
    assert ">60%<" in rate_panel and "width:60.0%" in rate_panel
    assert "width:100.0%" in computed_panel and "width:40.0%" in computed_panel and ">40<" in computed_panel
    assert f"background:{SETTING_COLORS['vllm']}" in html and "3 evictions" in computed_panel  # hover detail
    assert "<b>classic" not in html and "&lt;b&gt;classic" in html  # labels escaped


def test_ttft_figure_and_speedup() -> None:
    samples = [TtftSample(r, c, t, cached, 150) for r, c, t, cached in (
        (1, False, 1.0, 0), (1, True, 1.0, 0), (2, False, 1.2, 0), (2, True, 0.3, 128), (3, False, 0.8, 0), (3, True, 0.2, 128))]
    fig = ttft_figure(samples)
    off, on = fig.data
    assert (off.name, on.name) == ("caching off", "caching on")
    assert list(on.y) == [1000.0, 300.0, 200.0] and on.marker.color == TTFT_COLORS[True]
    assert list(off.x) == ["request 1", "request 2", "request 3"]
    assert speedup(samples) == (1.0 / 0.25)  # request 1 is left out: it cannot hit
    assert speedup(samples[:2]) is None


def test_hit_rate_property() -> None:
    assert RESULTS[1].hit_rate == 0.6
    assert PolicyResult("off", "x", 0, 0, 0, 0, 0).hit_rate == 0.0


def test_generated_trace_shares_prefixes_and_separates_the_policies() -> None:
    spec = TraceSpec()
    prompts = generate_trace(spec)
    assert len(prompts) == spec.num_requests and generate_trace(spec) == prompts
    prefix_len = spec.prefix_blocks * spec.block_size
    assert len({tuple(p[:prefix_len]) for p in prompts}) <= spec.num_prefixes
    off, vllm, classic = compare_trace(spec)
    assert off.hit_tokens == 0 and off.prefill_computed >= off.prompt_tokens
    assert vllm.hit_tokens > classic.hit_tokens > 0  # a small pool: the free rule matters
    assert vllm.prefill_computed < classic.prefill_computed < off.prefill_computed
    assert vllm.hit_tokens + vllm.prefill_computed == vllm.prompt_tokens  # no preemption in this trace


def test_design_doc_scenario_evicts_only_under_classic() -> None:
    off, vllm, classic = compare_scenario(BUILTIN_SCENARIOS["design-doc"])
    assert (off.evictions, vllm.evictions, classic.evictions) == (0, 0, 1)
    assert vllm.hit_tokens == classic.hit_tokens > 0
