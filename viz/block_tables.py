"""Each live request's block table: logical block i -> physical block id.

Colours say where a block came from: a cache **hit**, or **in use** as the pool grid draws it (computed
by this request, full and hashed), or **partial** (not full yet, so never hashed). A block the grid
draws "in use" is never a different colour here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import plotly.graph_objects as go

from engine.timeline import CacheSnapshot
from viz.blocks import TILE, as_id_set, tile_labels, tile_line
from viz.theme import STATE_COLORS, STATE_GLYPHS, base_layout, state_tag, text_color

LABEL_WIDTH = 2.2  # grid units left of the tiles for "r0 (running)"


def table_block_state(snapshot: CacheSnapshot, request_id: str, block_id: int, hits: Mapping[str, set[int]] | None) -> str:
    if hits and block_id in hits.get(request_id, set()):
        return "hit"
    return "in_use" if snapshot.block_hash[block_id] is not None else "partial"


def block_tables_figure(
    snapshot: CacheSnapshot,
    highlight: int | Iterable[int] | None = None,
    *,
    hits: Mapping[str, set[int]] | None = None,
    min_columns: int = 8,
    title: str | None = "Block tables (logical → physical)",
    touched: Iterable[int] = (),
) -> go.Figure:
    """One row per live request. ``hits`` (from :func:`engine.timeline.hit_blocks`) marks cache
    hits; tile shapes are named ``table-<request>-<index>``; the trace ``customdata`` is
    ``[request_id, logical_index, block_id, state]``."""
    selected = as_id_set(highlight)
    tables = [(rid, blocks) for rid, blocks in snapshot.block_tables.items() if blocks]
    cols = max([min_columns] + [len(b) for _, b in tables])
    rows = max(1, len(tables))
    shapes, annotations = [], []
    xs, ys, texts, hovers, custom, colors = [], [], [], [], [], []
    for row, (request_id, blocks) in enumerate(tables):
        status = snapshot.request_status.get(request_id, "")
        annotations.append(
            dict(x=-0.15, y=row + TILE / 2, text=f"<b>{request_id}</b> <span style='font-size:11px'>{status}</span>",
                 showarrow=False, xanchor="right")
        )
        for index, block_id in enumerate(blocks):
            state = table_block_state(snapshot, request_id, block_id, hits)
            shapes.append(
                dict(
                    type="rect", name=f"table-{request_id}-{index}", x0=index, x1=index + TILE, y0=row, y1=row + TILE,
                    fillcolor=STATE_COLORS[state], layer="below",
                    line=tile_line(block_id, selected, set(touched)),
                )
            )
            xs.append(index + TILE / 2)
            ys.append(row + TILE / 2)
            texts.append(f"<b>{block_id}</b>{STATE_GLYPHS[state]}")
            shared = snapshot.ref_cnt[block_id]
            hovers.append(
                f"{request_id}, logical block {index} → physical block {block_id}<br>{state_tag(state)}"
                + (f"<br>shared by {shared} requests" if shared > 1 else "")
            )
            custom.append([request_id, index, block_id, state])
            colors.append(text_color(state))
    if not tables:
        annotations.append(dict(x=cols / 2, y=0.45, text="No request holds blocks right now.", showarrow=False,
                                font=dict(color="#616161")))
    fig = go.Figure(tile_labels(xs, ys, texts, hovers, custom, colors, font_size=14, marker_size=30, name="block tables"))
    fig.update_layout(
        **base_layout(
            title=dict(text=title, x=0.01) if title else None, shapes=shapes, annotations=annotations,
            height=58 * rows + (65 if title else 25), margin=dict(l=10, r=10, t=45 if title else 10, b=5),
        )
    )
    fig.update_xaxes(range=[-LABEL_WIDTH, cols], visible=False, fixedrange=True)
    fig.update_yaxes(range=[rows, -0.1], visible=False, fixedrange=True)
    return fig
