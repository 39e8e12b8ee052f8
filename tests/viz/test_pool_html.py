"""The pool, free queue and block tables as HTML (the Lessons page): same states as the figures, escaped."""

from __future__ import annotations

import re

import pytest

from engine.events import BlocksAllocated, BlocksFreed
from engine.timeline import block_contents, hit_blocks
from teaching.scenarios.library import DESIGN_DOC_EXAMPLE
from teaching.scenarios.scenario import ScenarioRun, run_scenario
from viz.pool_html import POOL_CSS, block_grid_html, block_tables_html, free_queue_html
from viz.theme import OUTLINES, STATE_GLYPHS


def index_after(run: ScenarioRun, cls: type, request_id: str) -> int:
    return next(i for i, e in enumerate(run.events) if isinstance(e, cls) and e.request_id == request_id) + 1


@pytest.fixture(scope="module")
def vllm() -> ScenarioRun:
    return run_scenario(DESIGN_DOC_EXAMPLE, "vllm")


def tiles(html: str) -> list[tuple[str, str]]:
    """``(block id, state)`` of every tile, node or cell, in order."""
    return re.findall(r"data-block='(\d+)' data-state='(\w+)'", html)


def test_grid_states_glyphs_hashes_and_owners(vllm: ScenarioRun) -> None:
    snap = vllm.timeline().state_at(index_after(vllm, BlocksFreed, "r0"))  # r0 done, r1 holds 1, 2, 6, 7
    html = block_grid_html(snap)
    states = dict(tiles(html))
    assert len(states) == 11
    assert (states["0"], states["1"], states["4"], states["5"]) == ("null", "in_use", "cached_free", "free")
    assert f"<b>1 {STATE_GLYPHS['in_use']}</b>" in html and f"<b>4 {STATE_GLYPHS['cached_free']}</b>" in html
    assert f"<span class='h'>{snap.block_hash[1].hex()[:8]}</span>" in html  # one hash length
    assert snap.block_hash[1].hex() in html.split("data-block='1'")[1].split("</div>")[0]  # full hash on hover
    assert "grid-template-columns:repeat(" in html


def test_grid_touched_outline_tokens_and_the_next_mark(vllm: ScenarioRun) -> None:
    snap = vllm.timeline().state_at(len(vllm.events))
    html = block_grid_html(snap, touched=[3], contents=block_contents(vllm.events), token_text=vllm.token_text)
    assert re.findall(r"class='pp-tile touched'[^>]*data-block='(\d+)'", html) == ["3"]
    assert OUTLINES["touched"].css in POOL_CSS
    assert "tokens: I J K L" in html
    victim = snap.next_victim
    assert f"data-block='{victim}'" in html.split("next ▼")[0].rsplit("<div", 1)[1]


def test_free_queue_order_and_marks(vllm: ScenarioRun) -> None:
    snap = vllm.timeline().state_at(index_after(vllm, BlocksFreed, "r1"))
    html = free_queue_html(snap)
    assert [int(b) for b, _ in tiles(html)] == [7, 5, 8, 9, 10, 4, 3, 6, 2, 1]
    assert tiles(html)[0][1] == "free" and tiles(html)[5][1] == "cached_free"
    assert html.index("next to be reused ▼") < html.index("data-block='7'") < html.index("will be evicted ▼") < html.index(
        "data-block='4'")
    assert "HEAD" in html and "TAIL" in html and html.count("→") >= 9


def test_free_queue_empty_and_no_tables() -> None:
    run = run_scenario("blocks 3\nblock_size 2\nrequest a: x y z | max_tokens=2\nstep")
    assert "The free queue is empty" in free_queue_html(run.timeline().state_at(len(run.events)))
    assert "No request holds blocks" in block_tables_html(run_scenario("request a: x").timeline().state_at(0))


def test_block_tables_hits_and_partial(vllm: ScenarioRun) -> None:
    k = index_after(vllm, BlocksAllocated, "r2")
    html = block_tables_html(vllm.timeline().state_at(k), hits=hit_blocks(vllm.events, k))
    row = html.split("<b>r2</b>")[1]
    assert [(int(b), s) for b, s in tiles(row)][:4] == [(1, "hit"), (2, "hit"), (3, "hit"), (7, "partial")]
    assert f"1{STATE_GLYPHS['hit']}" in row


def test_request_ids_are_escaped() -> None:
    run = run_scenario("blocks 9\nrequest r0: A B C D E | output=x\nstep")
    snap = run.timeline().state_at(index_after(run, BlocksAllocated, "r0")).copy()
    snap.request_status["r0"] = "<img src=x onerror=alert(1)>"  # a status as odd as user text could be
    html = block_tables_html(snap)
    assert "<img" not in html and "&lt;img" in html
    assert "<" not in POOL_CSS.removeprefix("<style>").removesuffix("</style>")
