"""Figure builders: assert on the figure data (tile colours, labels, queue order)."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest

from engine.events import BlockRemoved, BlocksAllocated, BlocksFreed, CacheLookup
from engine.timeline import block_contents, hit_blocks
from teaching.scenarios.describe import describe_event
from teaching.scenarios.library import DESIGN_DOC_EXAMPLE
from teaching.scenarios.scenario import ScenarioRun, run_scenario
from viz import (
    block_grid,
    block_tables_figure,
    free_queue_figure,
    hash_table_figure,
    hash_table_rows,
    legend_html,
    next_eviction,
)
from viz.hash_table import SELECTED_ROW
from viz.theme import OUTLINES, STATE_COLORS


def index_after(run: ScenarioRun, cls: type, request_id: str) -> int:
    return next(i for i, e in enumerate(run.events) if isinstance(e, cls) and e.request_id == request_id) + 1


@pytest.fixture(scope="module")
def classic() -> ScenarioRun:
    return run_scenario(DESIGN_DOC_EXAMPLE, "classic")


@pytest.fixture(scope="module")
def vllm() -> ScenarioRun:
    return run_scenario(DESIGN_DOC_EXAMPLE, "vllm")


def shape_fill(fig: go.Figure, name: str) -> str:
    return next(s.fillcolor for s in fig.layout.shapes if s.name == name)


def test_block_grid_colours_and_labels(vllm: ScenarioRun) -> None:
    k = index_after(vllm, BlocksFreed, "r0")  # r0 done, r1 holds 1, 2, 6, 7
    snap = vllm.timeline().state_at(k)
    fig = block_grid(snap)
    assert len(fig.layout.shapes) == 11
    assert shape_fill(fig, "block-0") == STATE_COLORS["null"]
    assert shape_fill(fig, "block-1") == STATE_COLORS["in_use"]
    assert shape_fill(fig, "block-4") == STATE_COLORS["cached_free"]  # freed, still hashed
    assert shape_fill(fig, "block-5") == STATE_COLORS["free"]  # freed, no hash
    assert shape_fill(fig, "block-8") == STATE_COLORS["free"]
    trace = fig.data[0]
    assert [c[0] for c in trace.customdata] == list(range(11))
    assert trace.customdata[4][1] == "cached_free"
    label1 = trace.text[1]
    assert "<b>1</b>" in label1 and "ref 1" in label1 and "r1" in label1
    assert snap.block_hash[1].hex() in trace.hovertext[1]  # full hash on hover
    assert fig.layout.xaxis.range is not None and fig.layout.yaxis.range is not None


def test_block_grid_highlight_and_tokens(vllm: ScenarioRun) -> None:
    snap = vllm.timeline().state_at(len(vllm.events))
    fig = block_grid(snap, highlight=3, contents=block_contents(vllm.events), token_text=vllm.token_text)
    lines = {s.name: s.line for s in fig.layout.shapes}
    assert lines["block-3"].color == OUTLINES["selected"].color and lines["block-3"].dash == "dash"
    assert lines["block-3"].width > lines["block-2"].width
    assert "tokens: I J K L" in fig.data[0].hovertext[3]


def test_free_queue_order_and_victims(vllm: ScenarioRun, classic: ScenarioRun) -> None:
    snap = vllm.timeline().state_at(index_after(vllm, BlocksFreed, "r1"))
    fig = free_queue_figure(snap)
    assert [c[0] for c in fig.data[0].customdata] == [7, 5, 8, 9, 10, 4, 3, 6, 2, 1]
    assert [c[2] for c in fig.data[0].customdata] == list(range(10))
    assert fig.data[0].customdata[0][1] == "free" and fig.data[0].customdata[5][1] == "cached_free"
    texts = [a.text for a in fig.layout.annotations]
    assert "▲ next to be reused" in texts and "will be evicted ▼" in texts
    assert next_eviction(snap) == 4
    assert "<b>HEAD</b>" in texts and "<b>TAIL</b>" in texts
    # classic: block 8 (no hash) is the head; 4 is still the first cached block.
    csnap = classic.timeline().state_at(index_after(classic, BlocksFreed, "r1"))
    cfig = free_queue_figure(csnap)
    assert [c[0] for c in cfig.data[0].customdata] == [8, 9, 10, 5, 4, 3, 7, 6, 2, 1]
    assert next_eviction(csnap) == 4  # 8, 9, 10 and 5 have no hash: reusing them loses nothing


def test_free_queue_empty_message() -> None:
    run = run_scenario("blocks 3\nblock_size 2\nrequest a: x y z | max_tokens=2\nstep")
    fig = free_queue_figure(run.timeline().state_at(len(run.events)))
    assert "empty" in fig.layout.annotations[0].text


def test_block_tables_hits_and_partial(vllm: ScenarioRun) -> None:
    k = index_after(vllm, BlocksAllocated, "r2")
    snap = vllm.timeline().state_at(k)
    fig = block_tables_figure(snap, hits=hit_blocks(vllm.events, k))
    rows = [c for c in fig.data[0].customdata if c[0] == "r2"]
    assert [c[2] for c in rows] == [1, 2, 3, 7, 5, 8, 9, 10]
    assert [c[3] for c in rows[:3]] == ["hit"] * 3
    assert shape_fill(fig, "table-r2-0") == STATE_COLORS["hit"]
    # At the allocate event the new blocks are not hashed yet: partial until "stored".
    assert rows[3][3] == "partial"
    after_store = block_tables_figure(vllm.timeline().state_at(k + 1), hits=hit_blocks(vllm.events, k + 1))
    states = {c[2]: c[3] for c in after_store.data[0].customdata}
    assert states[7] == "in_use" and states[10] == "partial"


def test_block_tables_empty() -> None:
    run = run_scenario("request a: x")
    fig = block_tables_figure(run.timeline().state_at(0))
    assert "No request" in fig.layout.annotations[0].text


def test_hash_table_rows_and_duplicates() -> None:
    # b prefills the same 4 tokens as a in the same step: its block is a duplicate.
    run = run_scenario("block_size 2\nrequest a: x y z w | max_tokens=1\nrequest b: x y z w | max_tokens=1\nstep")
    snap = run.timeline().state_at(len(run.events))
    rows = hash_table_rows(snap, contents=block_contents(run.events), token_text=run.token_text)
    assert rows[0].tokens == "x y"
    assert all(len(r.full_hash) == 64 for r in rows)
    fig = hash_table_figure(snap, highlight=rows[0].block_ids[0])
    cells = fig.data[0].cells
    assert list(cells.values[0]) == [r.short_hash for r in rows]
    assert cells.fill.color[0][0] == SELECTED_ROW


def test_hash_table_duplicate_entry() -> None:
    # b computes and caches "r s" in step 1; in step 2 a's own output fills its block "r s"
    # too, and the append-only block table forces a duplicate entry.
    text = "block_size 2\nrequest a: p q r | output=s x\nrequest b: p q r s t u\nstep\nstep"
    run = run_scenario(text)
    snap = run.timeline().state_at(len(run.events))
    dups = [r for r in hash_table_rows(snap) if r.duplicate]
    assert len(dups) == 1 and len(dups[0].block_ids) == 2
    assert "duplicate: lookups use" in dups[0].blocks_label
    fig = hash_table_figure(snap)
    index = list(fig.data[0].cells.values[0]).index(dups[0].short_hash)
    assert fig.data[0].cells.fill.color[0][index] == "#fff3e0"


def test_describe_event_examples(vllm: ScenarioRun, classic: ScenarioRun) -> None:
    lookup = next(e for e in vllm.events if isinstance(e, CacheLookup) and e.request_id == "r1")
    text = describe_event(lookup)
    assert text.startswith("r1 hit blocks 1 and 2 (8 tokens)")
    assert "index 2" in text and "miss" in text
    free = next(e for e in vllm.events if isinstance(e, BlocksFreed) and e.request_id == "r0")
    assert "5 → head" in describe_event(free)
    evict = next(e for e in classic.events if isinstance(e, BlockRemoved))
    words = describe_event(evict, classic.token_text, block_contents(classic.events))
    assert "Block 4 is evicted" in words and "M N O P" in words
    for event in vllm.events:
        assert describe_event(event, vllm.token_text).strip()


def test_legend_has_every_state() -> None:
    html = legend_html()
    for color in ("null", "free", "cached_free", "in_use"):
        assert STATE_COLORS[color] in html


def test_repl_usage(vllm: ScenarioRun) -> None:
    fig = block_grid(vllm.engine.timeline().state_at(5))
    assert isinstance(fig, go.Figure) and fig.to_json()


def test_big_pools_get_compact_tiles() -> None:
    run = run_scenario("blocks 64\nblock_size 2\nrequest a: x y z w v u | max_tokens=2\nrun")
    fig = block_grid(run.timeline().state_at(len(run.events)))
    assert len(fig.layout.shapes) == 64
    assert fig.layout.xaxis.range[1] == 16  # 16 columns, 4 rows
    assert fig.data[0].text[1] == "<b>1</b> #" and "ref count: 0" in fig.data[0].hovertext[1]
    assert fig.layout.height < 400
