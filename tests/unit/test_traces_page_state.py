"""The Production traces page's state without Streamlit: replays run once per trace and setting, then are kept."""

from __future__ import annotations

import json

from teaching.traces.loader import parse_trace
from teaching.traces.page import AUTO_RUN_BLOCKS, PAGE_ROUTERS, TracesPage, curve_rows, router_rows
from teaching.traces.policies import POLICIES
from teaching.traces.replay import PreparedTrace


def small_trace() -> PreparedTrace:
    """Twelve requests: a shared three-block prefix, then each its own block."""
    lines = [json.dumps({"timestamp": i * 100, "input_length": 4 * 512, "output_length": 2,
                         "hash_ids": [1, 2, 3, 100 + i]}) for i in range(12)]
    return PreparedTrace(parse_trace("\n".join(lines).encode(), "small.jsonl"))


def test_a_small_trace_replays_at_once_and_is_kept_per_mode() -> None:
    page, prepared = TracesPage(), small_trace()
    assert prepared.trace.num_blocks <= AUTO_RUN_BLOCKS
    assert page.wants_curve("small", prepared, "sequential", asked=False)
    curve = page.replay_curve("small", prepared, "sequential")
    assert not page.wants_curve("small", prepared, "sequential", asked=True)  # kept: no second replay
    assert page.curves[("small", "sequential")] is curve
    assert page.wants_curve("small", prepared, "overlap", asked=False)  # another mode is another replay
    rows = curve_rows(curve)
    assert len(rows) == len(curve.capacities) + 1 and rows[-1]["capacity (tokens)"] == "unbounded"
    assert rows[-1][POLICIES["vllm"]] == f"{33 / 48:.1%}"  # 11 requests hit 3 of their 4 blocks


def test_routers_run_when_asked_and_are_kept_per_setting() -> None:
    page, prepared = TracesPage(replicas=2, blocks_per_replica=100), small_trace()
    setting = page.route_setting("small")
    assert setting == ("small", "sequential", 2, 100, "vllm")
    assert page.route(setting) is None
    results = page.route(setting, prepared)
    assert results is not None and list(results) == PAGE_ROUTERS
    page.replicas = 3
    assert page.route(setting) is results and page.route(page.route_setting("small")) is None
    rows = router_rows(results)
    assert [r["router"] for r in rows] == PAGE_ROUTERS and rows[0]["requests per replica"].count("/") == 1
