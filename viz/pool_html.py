"""The block pool, the free queue and the block tables as plain HTML/CSS, for ``st.html``.

The same three pictures as :func:`viz.blocks.block_grid`, :func:`viz.free_queue.free_queue_figure`
and :func:`viz.block_tables.block_tables_figure`, with the same states, glyphs, outlines and
hover details (their state rules are reused from those modules). Drawn as HTML they arrive
in the page's own render; a Plotly chart first waits for the browser to load Plotly.js
(about a second on a cold load). Style them with ``POOL_CSS`` (a style-only ``st.html``:
Streamlit strips ``<style>`` out of mixed HTML). Every text is escaped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from html import escape

from engine.timeline import CacheSnapshot
from teaching.scenarios.describe import TokenText, tokens_label
from viz.block_tables import table_block_state
from viz.blocks import COMPACT_ABOVE, block_details, block_state, grid_shape
from viz.free_queue import queue_marks, queue_node_details
from viz.theme import (
    OUTLINES,
    PLAIN_OUTLINE,
    STATE_GLYPHS,
    short_hash,
    state_tag,
    swatch_css,
    text_color,
)

POOL_CSS = (
    "<style>"
    ".pl-pool { font-size: 14px; color: #212121; margin-bottom: 12px; }"
    ".pl-pool .pp-title { font-weight: 700; font-size: 16px; margin-bottom: 4px; }"
    ".pl-pool .pp-grid { display: grid; gap: 20px 6px; padding-top: 18px; }"
    f".pl-pool .pp-tile {{ position: relative; border: 1px solid {PLAIN_OUTLINE}; border-radius: 6px; min-width: 0;"
    " padding: 3px 2px; text-align: center; line-height: 1.2; overflow-wrap: anywhere; }"
    ".pl-pool .pp-tile span { display: block; }"
    ".pl-pool .h { font-family: ui-monospace, 'DejaVu Sans Mono', monospace; font-size: 12px; }"
    f".pl-pool .touched {{ outline: {OUTLINES['touched'].css}; outline-offset: 1px; }}"
    ".pl-pool .pp-next { position: absolute; left: 0; right: 0; top: -18px; font-size: 13px; font-weight: 700;"
    " white-space: nowrap; }"
    ".pl-pool .pp-queue { display: flex; flex-wrap: wrap; align-items: flex-end; gap: 4px 2px; }"
    ".pl-pool .pp-end { font-size: 12px; font-weight: 700; padding: 0 4px 14px; }"
    ".pl-pool .pp-slot { display: flex; flex-direction: column; align-items: center; }"
    ".pl-pool .pp-mark { font-size: 13px; font-weight: 700; white-space: nowrap; min-height: 1.3em; }"
    f".pl-pool .pp-node {{ border: 1px solid {PLAIN_OUTLINE}; border-radius: 5px; min-width: 3.4em; padding: 2px 4px;"
    " text-align: center; line-height: 1.2; }"
    ".pl-pool .pp-node span { display: block; }"
    ".pl-pool .pp-arrow { color: #455a64; font-weight: 700; padding: 0 1px 12px; }"
    ".pl-pool .pp-row { display: flex; align-items: center; gap: 8px; margin-bottom: 6px; }"
    ".pl-pool .pp-rid { min-width: 5.5em; white-space: nowrap; }"
    ".pl-pool .pp-rid small { color: #546e7a; }"
    ".pl-pool .pp-cells { display: flex; flex-wrap: wrap; gap: 4px; }"
    f".pl-pool .pp-cell {{ border: 1px solid {PLAIN_OUTLINE}; border-radius: 5px; min-width: 2.6em; padding: 4px 5px;"
    " text-align: center; font-weight: 700; white-space: nowrap; }"
    ".pl-pool .pp-empty { color: #616161; }"
    "</style>"
)


def _look(cls: str, state: str, touched: bool) -> str:
    """``class`` and ``style`` attributes for a tile in ``state`` (outlined when this step touched it)."""
    return f"class='{cls}{' touched' if touched else ''}' style='{swatch_css(state)};color:{text_color(state)}'"


def _tokens(snapshot: CacheSnapshot, block_id: int, contents: Mapping[bytes, list[int]] | None,
            token_text: TokenText | None) -> str:
    block_hash = snapshot.block_hash[block_id]
    return tokens_label(contents.get(block_hash) if contents and block_hash else None, token_text)


def block_grid_html(
    snapshot: CacheSnapshot,
    *,
    contents: Mapping[bytes, list[int]] | None = None,
    token_text: TokenText | None = None,
    touched: Iterable[int] = (),
    title: str = "Physical KV blocks",
) -> str:
    """Every physical block as a tile: id and glyph, ref count, short hash, owners; "next ▼" over the
    head of the free queue; full hash, tokens and owners on hover."""
    touched_ids = set(touched)
    _, cols = grid_shape(snapshot.num_blocks)
    compact = snapshot.num_blocks > COMPACT_ABOVE
    victim = snapshot.next_victim
    tiles = []
    for block_id in range(snapshot.num_blocks):
        state = block_state(snapshot, block_id)
        block_hash = snapshot.block_hash[block_id]
        owners = snapshot.owners(block_id)
        lines = [f"<b>{block_id} {STATE_GLYPHS[state]}</b>"]
        if block_id and not compact:  # small tiles: ref count, hash and owners are on hover only
            lines += [f"ref {snapshot.ref_cnt[block_id]}", f"<span class='h'>{short_hash(block_hash)}</span>"]
            if owners:
                lines.append(escape(", ".join(owners) if len(owners) <= 2 else f"{owners[0]} +{len(owners) - 1}"))
        tokens = _tokens(snapshot, block_id, contents, token_text) if block_id else ""
        hover = [f"block {block_id} — {state_tag(state)}", *block_details(snapshot, block_id, tokens)]
        mark = "<span class='pp-next'>next ▼</span>" if block_id == victim else ""
        look = _look("pp-tile", state, block_id in touched_ids)
        tiles.append(f"<div {look} data-block='{block_id}' data-state='{state}' title='{escape(chr(10).join(hover))}'>"
                     f"{mark}{''.join(f'<span>{line}</span>' for line in lines)}</div>")
    return (f"<div class='pl-pool'><div class='pp-title'>{escape(title)}</div>"
            f"<div class='pp-grid' style='grid-template-columns:repeat({cols},minmax(0,1fr))'>{''.join(tiles)}</div></div>")


def free_queue_html(
    snapshot: CacheSnapshot,
    *,
    contents: Mapping[bytes, list[int]] | None = None,
    token_text: TokenText | None = None,
    touched: Iterable[int] = (),
    title: str = "Free queue (head → tail)",
) -> str:
    """The free queue as the linked list it is, HEAD → … → TAIL. Marks as
    :func:`viz.free_queue.queue_marks` says."""
    touched_ids = set(touched)
    queue = list(snapshot.free_queue)
    head = f"<div class='pl-pool'><div class='pp-title'>{escape(title)}</div>"
    if not queue:
        return head + ("<div class='pp-empty'>The free queue is empty: the next allocation must wait "
                       "(or preempt a request).</div></div>")
    marks = {block_id: f"{label} ▼" for block_id, label in queue_marks(snapshot).items()}
    items = ["<span class='pp-end'>HEAD</span>"]
    for pos, block_id in enumerate(queue):
        block_hash = snapshot.block_hash[block_id]
        state = "cached_free" if block_hash is not None else "free"
        detail = chr(10).join(queue_node_details(block_hash, _tokens(snapshot, block_id, contents, token_text)))
        look = _look("pp-node", state, block_id in touched_ids)
        if pos:
            items.append("<span class='pp-arrow'>→</span>")
        items.append(
            f"<div class='pp-slot'><span class='pp-mark'>{marks.get(block_id, '')}</span>"
            f"<div {look} data-block='{block_id}' data-state='{state}' "
            f"title='{escape(f'block {block_id}, position {pos} from the head{chr(10)}{detail}')}'>"
            f"<span><b>{block_id} {STATE_GLYPHS[state]}</b></span><span class='h'>{short_hash(block_hash)}</span></div></div>"
        )
    items.append("<span class='pp-end'>TAIL</span>")
    return head + f"<div class='pp-queue'>{''.join(items)}</div></div>"


def block_tables_html(
    snapshot: CacheSnapshot,
    *,
    hits: Mapping[str, set[int]] | None = None,
    touched: Iterable[int] = (),
    title: str = "Block tables (logical → physical)",
) -> str:
    """One row per request holding blocks: its physical block ids in logical order, each a hit,
    computed or partial (glyph and fill), shared blocks said so on hover."""
    touched_ids = set(touched)
    rows = []
    for request_id, blocks in snapshot.block_tables.items():
        if not blocks:
            continue
        status = snapshot.request_status.get(request_id, "")
        cells = []
        for index, block_id in enumerate(blocks):
            state = table_block_state(snapshot, request_id, block_id, hits)
            shared = snapshot.ref_cnt[block_id]
            hover = (f"{request_id}, logical block {index} → physical block {block_id}\n{state_tag(state)}"
                     + (f"\nshared by {shared} requests" if shared > 1 else ""))
            look = _look("pp-cell", state, block_id in touched_ids)
            cells.append(f"<span {look} data-block='{block_id}' data-state='{state}' title='{escape(hover)}'>"
                         f"{block_id}{STATE_GLYPHS[state]}</span>")
        rows.append(f"<div class='pp-row'><span class='pp-rid'><b>{escape(request_id)}</b> <small>{escape(status)}</small>"
                    f"</span><div class='pp-cells'>{''.join(cells)}</div></div>")
    body = "".join(rows) or "<div class='pp-empty'>No request holds blocks right now.</div>"
    return f"<div class='pl-pool'><div class='pp-title'>{escape(title)}</div>{body}</div>"
