"""The physical block pool as a grid of tiles: id, ref count, short hash, owners.

Colour = state (``viz.theme.STATE_COLORS``): null block 0, free and empty, free but still
cached (hittable until evicted), in use. Hover shows the full hash and the block's tokens.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import plotly.graph_objects as go

from engine.timeline import CacheSnapshot
from teaching.scenarios.describe import TokenText, tokens_label
from viz.theme import (
    OUTLINES,
    PLAIN_OUTLINE,
    STATE_COLORS,
    STATE_GLYPHS,
    base_layout,
    plain_text,
    short_hash,
    state_tag,
    text_color,
)

TILE = 0.9  # tile width/height in grid units (the rest is the gap)
ROW_PITCH = 1.2  # rows leave room for the "next" label


def block_state(snapshot: CacheSnapshot, block_id: int) -> str:
    """One of ``null``, ``in_use``, ``cached_free``, ``free``."""
    if block_id == 0:
        return "null"
    if snapshot.ref_cnt[block_id] > 0:
        return "in_use"
    return "cached_free" if snapshot.block_hash[block_id] is not None else "free"


COMPACT_ABOVE = 48  # larger pools get small tiles: the id only


def grid_shape(num_blocks: int, columns: int | None = None) -> tuple[int, int]:
    """(rows, columns) for ``num_blocks`` tiles: balanced rows of at most 8 (16 for big pools) unless told."""
    if columns is None:
        widest = 8 if num_blocks <= COMPACT_ABOVE else 16
        rows = math.ceil(num_blocks / widest)
        columns = math.ceil(num_blocks / rows)
    return math.ceil(num_blocks / columns), columns


def tile_line(block_id: int, selected: set[int], touched: set[int]) -> dict[str, object]:
    """A tile's border: the selection outline, else the touched-by-this-step outline, else plain."""
    for key, ids in (("selected", selected), ("touched", touched)):
        if block_id in ids:
            outline = OUTLINES[key]
            return dict(color=outline.color, width=outline.width, dash=outline.dash)
    return dict(color=PLAIN_OUTLINE, width=1)


def as_id_set(highlight: int | Iterable[int] | None) -> set[int]:
    if highlight is None:
        return set()
    if isinstance(highlight, int):
        return {highlight}
    return set(highlight)


def tile_labels(
    xs: list[float], ys: list[float], texts: list[str], hovers: list[str], custom: list[list[object]],
    text_colors: list[str], *, font_size: int, marker_size: int, name: str,
) -> go.Scatter:
    """The one trace over a figure's tiles: their labels, hover text and ``customdata`` for clicks.

    The tiles themselves are layout shapes; this invisible-marker scatter sits on top so the labels
    are readable and a click on a tile reports its ``customdata``.
    """
    return go.Scatter(
        x=xs, y=ys, mode="markers+text", text=texts, hovertext=hovers, hoverinfo="text", customdata=custom,
        textfont=dict(color=text_colors, size=font_size), name=name,
        marker=dict(symbol="square", size=marker_size, color="rgba(0,0,0,0)"),
    )


def block_details(snapshot: CacheSnapshot, block_id: int, tokens: str) -> list[str]:
    """A block tile's tooltip after its title line: ref count, full hash, ``tokens``, owners, and whether it
    is the next one handed out. Used by the figure (the browser player draws the same mark)."""
    if block_id == 0:
        return ["reserved placeholder, never allocated"]
    block_hash = snapshot.block_hash[block_id]
    owners = snapshot.owners(block_id)
    lines = [f"ref count: {snapshot.ref_cnt[block_id]}", f"hash: {block_hash.hex() if block_hash else 'none'}"]
    if tokens:
        lines.append(f"tokens: {tokens}")
    lines.append(f"owners: {', '.join(owners) if owners else 'none'}")
    if block_id == snapshot.next_victim:
        lines.append("head of the free queue: the next block reused")
    return lines


def block_grid(
    snapshot: CacheSnapshot,
    highlight: int | Iterable[int] | None = None,
    *,
    contents: Mapping[bytes, list[int]] | None = None,
    token_text: TokenText | None = None,
    columns: int | None = None,
    title: str | None = "Physical KV blocks",
    touched: Iterable[int] = (),
) -> go.Figure:
    """Every physical block as a tile. ``highlight``: block id(s) selected (dashed outline);
    ``touched``: block ids the current step touched (solid outline).

    ``contents`` (hash -> tokens, from :func:`engine.timeline.block_contents`) adds the tokens to
    the hover text. Tiles are layout shapes named ``block-<id>``; one scatter trace carries
    the labels, the hover text and ``customdata = [block_id, state]`` for click selection.
    """
    selected = as_id_set(highlight)
    touched_ids = set(touched)
    rows, cols = grid_shape(snapshot.num_blocks, columns)
    compact = snapshot.num_blocks > COMPACT_ABOVE
    victim = snapshot.next_victim
    shapes, xs, ys, texts, hovers, custom, colors = [], [], [], [], [], [], []
    for block_id in range(snapshot.num_blocks):
        row, col = divmod(block_id, cols)
        state = block_state(snapshot, block_id)
        block_hash = snapshot.block_hash[block_id]
        owners = snapshot.owners(block_id)
        shapes.append(
            dict(
                type="rect", name=f"block-{block_id}", x0=col, x1=col + TILE, y0=row * ROW_PITCH,
                y1=row * ROW_PITCH + TILE,
                fillcolor=STATE_COLORS[state], layer="below",
                line=tile_line(block_id, selected, touched_ids),
            )
        )
        if block_id == 0:
            label = f"<b>0</b><br>{STATE_GLYPHS['null']}"
        elif compact:  # tiles too small for more: ref count, hash and owners are on hover
            label = f"<b>{block_id}</b> {STATE_GLYPHS[state]}"
        else:
            lines = [f"<b>{block_id}</b> {STATE_GLYPHS[state]}", f"ref {snapshot.ref_cnt[block_id]}", short_hash(block_hash)]
            if owners:
                lines.append(", ".join(owners) if len(owners) <= 2 else f"{owners[0]} +{len(owners) - 1}")
            label = "<br>".join(lines)
        tokens = plain_text(tokens_label(contents.get(block_hash) if contents and block_hash else None, token_text))
        hover = [f"<b>block {block_id}</b> — {state_tag(state)}", *block_details(snapshot, block_id, tokens)]
        xs.append(col + TILE / 2)
        ys.append(row * ROW_PITCH + TILE / 2)
        texts.append(label)
        hovers.append("<br>".join(hover))
        custom.append([block_id, state])
        colors.append(text_color(state))
    fig = go.Figure(
        tile_labels(xs, ys, texts, hovers, custom, colors, font_size=11 if compact else 13, marker_size=44, name="blocks")
    )
    annotations = []
    if victim is not None:
        row, col = divmod(victim, cols)
        annotations.append(
            dict(x=col + TILE / 2, y=row * ROW_PITCH, yshift=1, text="next ▼", showarrow=False, yanchor="bottom",
                 font=dict(size=14, color="#111111"))
        )
    fig.update_layout(
        **base_layout(
            title=dict(text=title, x=0.01) if title else None,
            height=(52 if compact else 125) * rows + (70 if title else 30), shapes=shapes, annotations=annotations,
            margin=dict(l=10, r=10, t=50 if title else 20, b=10),
        )
    )
    fig.update_xaxes(range=[-0.1, cols], visible=False, fixedrange=True)
    fig.update_yaxes(range=[rows * ROW_PITCH - (ROW_PITCH - TILE), -0.3], visible=False, fixedrange=True)
    return fig
