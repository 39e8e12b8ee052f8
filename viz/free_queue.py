"""The free queue as the linked list it is: head -> ... -> tail, the next block reused and the next eviction marked.

The head is the next block handed out. Popping a block that still has a hash *evicts*
it, so the first cached block from the head is the next eviction victim.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import plotly.graph_objects as go

from engine.timeline import CacheSnapshot
from teaching.scenarios.describe import TokenText, tokens_label
from viz.blocks import as_id_set, tile_labels, tile_line
from viz.theme import STATE_COLORS, STATE_GLYPHS, base_layout, plain_text, short_hash, text_color

NODE_W = 0.68  # node width in grid units; the rest of each unit is the arrow


def next_eviction(snapshot: CacheSnapshot) -> int | None:
    """The first block from the head that still carries a hash (the next cached prefix lost)."""
    for block_id in snapshot.free_queue:
        if snapshot.block_hash[block_id] is not None:
            return block_id
    return None


#: The free queue's marks, in one place (the lab's browser player gets them too): an empty head is only
#: reused, nothing is lost; a hashed block is evicted when an allocation reaches it.
QUEUE_MARKS: dict[str, str] = {
    "reused": "next to be reused",
    "evicted": "will be evicted",
    "both": "will be evicted next",
}


def queue_marks(snapshot: CacheSnapshot) -> dict[int, str]:
    """The free queue's marks: its head "next to be reused", the first block still holding a hash "will
    be evicted"; "will be evicted next" when the head itself still holds a hash. Empty for an empty queue."""
    queue = snapshot.free_queue
    if not queue:
        return {}
    head, evict = queue[0], next_eviction(snapshot)
    marks = {head: QUEUE_MARKS["both"] if evict == head else QUEUE_MARKS["reused"]}
    if evict is not None and evict != head:
        marks[evict] = QUEUE_MARKS["evicted"]
    return marks


def queue_node_details(block_hash: bytes | None, tokens: str) -> list[str]:
    """A free-queue node's tooltip after its position line: what reusing it would lose."""
    if block_hash is None:
        return ["no hash: nothing is lost when it is reused"]
    return [f"still cached: {block_hash.hex()}"] + ([f"tokens: {tokens}"] if tokens else [])


def free_queue_figure(
    snapshot: CacheSnapshot,
    highlight: int | Iterable[int] | None = None,
    *,
    contents: Mapping[bytes, list[int]] | None = None,
    token_text: TokenText | None = None,
    per_row: int = 10,
    title: str | None = "Free queue (head → tail)",
    touched: Iterable[int] = (),
) -> go.Figure:
    """Nodes in head -> tail order, wrapped every ``per_row``; node trace ``customdata`` is
    ``[block_id, state, position]``. Marks as :func:`queue_marks` says."""
    selected = as_id_set(highlight)
    queue = list(snapshot.free_queue)
    per_row = max(1, min(per_row, snapshot.num_blocks - 1))  # fixed per pool, so nodes keep their size
    rows = max(1, -(-len(queue) // per_row))
    shapes, annotations = [], []
    xs, ys, texts, hovers, custom, colors = [], [], [], [], [], []
    for pos, block_id in enumerate(queue):
        row, col = divmod(pos, per_row)
        block_hash = snapshot.block_hash[block_id]
        state = "cached_free" if block_hash is not None else "free"
        x0, y0 = col + 0.5, row * 1.6
        shapes.append(
            dict(
                type="rect", name=f"node-{block_id}", x0=x0, x1=x0 + NODE_W, y0=y0, y1=y0 + 0.8,
                fillcolor=STATE_COLORS[state], layer="below",
                line=tile_line(block_id, selected, set(touched)),
            )
        )
        xs.append(x0 + NODE_W / 2)
        ys.append(y0 + 0.4)
        texts.append(f"<b>{block_id}</b> {STATE_GLYPHS[state]}<br>{short_hash(block_hash)}")
        tokens = plain_text(tokens_label(contents.get(block_hash) if contents and block_hash else None, token_text))
        hovers.append("<br>".join([f"<b>block {block_id}</b>, position {pos} from the head",
                                   *queue_node_details(block_hash, tokens)]))
        custom.append([block_id, state, pos])
        colors.append(text_color(state))
        if pos + 1 < len(queue):
            if col + 1 < per_row:  # arrow to the next node in this row
                annotations.append(
                    dict(x=x0 + 1 - 0.02, y=y0 + 0.4, ax=x0 + NODE_W + 0.02, ay=y0 + 0.4, xref="x", yref="y",
                         axref="x", ayref="y", showarrow=True, arrowhead=2, arrowsize=1.2, arrowwidth=1.6,
                         arrowcolor="#455a64", text="")
                )
            else:  # the list continues on the next row
                annotations.append(dict(x=x0 + NODE_W + 0.1, y=y0 + 0.4, text="↵", showarrow=False, font=dict(size=18)))
    if queue:
        annotations.append(dict(x=0.42, y=0.4, text="<b>HEAD</b>", showarrow=False, xanchor="right", font=dict(size=12)))
        last_row, last_col = divmod(len(queue) - 1, per_row)
        annotations.append(
            dict(x=last_col + 0.5 + NODE_W + 0.08, y=last_row * 1.6 + 0.4, text="<b>TAIL</b>", showarrow=False,
                 xanchor="left", font=dict(size=12))
        )
        for block_id, label in queue_marks(snapshot).items():
            pos = queue.index(block_id)
            row, col = divmod(pos, per_row)
            above = label == QUEUE_MARKS["evicted"]  # above the node, so it never collides with the head's mark
            annotations.append(
                dict(x=col + 0.5 + NODE_W / 2, y=row * 1.6 + (0 if above else 0.8),
                     text=f"{label} ▼" if above else f"▲ {label}", showarrow=False,
                     yanchor="bottom" if above else "top", yshift=2 if above else -2,
                     font=dict(size=14, color="#111111"))
            )
    else:
        annotations.append(
            dict(x=per_row / 2 + 0.5, y=0.4, showarrow=False, font=dict(size=14, color="#616161"),
                 text="The free queue is empty: the next allocation must wait (or preempt a request).")
        )
    fig = go.Figure(tile_labels(xs, ys, texts, hovers, custom, colors, font_size=12, marker_size=36, name="free queue"))
    fig.update_layout(
        **base_layout(
            title=dict(text=title, x=0.01) if title else None, shapes=shapes, annotations=annotations,
            height=int(100 * rows + (70 if title else 30)), margin=dict(l=10, r=10, t=45 if title else 10, b=5),
        )
    )
    fig.update_xaxes(range=[-0.45, per_row + 0.75], visible=False, fixedrange=True)
    fig.update_yaxes(range=[rows * 1.6 - 0.45, -0.45], visible=False, fixedrange=True)
    return fig
