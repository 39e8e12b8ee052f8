"""Figures of a live server's prefix cache, from :class:`teaching.live.state.ReplicaState` only.

* :func:`prefix_tree_figure`: the cached blocks as a forest, parent -> child, left to right, so
  every root-to-leaf path reads as one cached prompt prefix; blocks stored in the latest batch are
  marked, blocks evicted recently are drawn as red ghosts where they were.
* :func:`cache_history_figure`: per batch, blocks stored (up) and removed (down), and the number
  cached after it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import plotly.graph_objects as go

from teaching.live.state import BlockKey, CachedBlock, ReplicaState
from viz.theme import STATE_COLORS, base_layout, short_hash, text_color

Decode = Callable[[Sequence[int]], str]

#: More blocks than this are not drawn one by one (the newest are kept, the rest counted).
MAX_TREE_NODES = 240
LABEL_CHARS = 16
#: Evicted blocks stay drawn (as red crosses) for this many event batches.
GHOST_BATCHES = 3
NODE_W, NODE_H = 0.86, 0.7  # a block's rectangle, in (depth, row) units
#: Colours: a cached block can be hit; a new one was just stored; a ghost was just evicted.
TREE_STATES = {"cached": "cached_free", "new": "computed", "evicted": "evicted"}
TREE_COLORS = {name: STATE_COLORS[state] for name, state in TREE_STATES.items()}


def block_text(block: CachedBlock, decode: Decode | None) -> str:
    if decode is None:
        return " ".join(str(t) for t in block.token_ids[:6]) + (" …" if len(block.token_ids) > 6 else "")
    try:
        return decode(list(block.token_ids))
    except Exception:  # a tokenizer that does not fit these ids: show the ids instead
        return block_text(block, None)


def _clip(text: str, limit: int = LABEL_CHARS) -> str:
    text = text.replace("\n", "↵")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def recent_ghosts(replica: ReplicaState, batches: int = GHOST_BATCHES) -> list[CachedBlock]:
    """Blocks evicted in the last ``batches`` batches and not stored again since."""
    if replica.last_seq is None:
        return []
    return [g for g in replica.ghosts if g.block_hash not in replica.blocks
            and g.removed_seq is not None and g.removed_seq > replica.last_seq - batches]


def tree_layout(replica: ReplicaState, max_nodes: int = MAX_TREE_NODES) -> dict[BlockKey, tuple[int, float]]:
    """(depth, row) per drawn block: leaves get rows in order, a parent sits beside its first child.

    When the cache holds more than ``max_nodes`` blocks, only the newest are drawn (with their
    cached ancestors, so every drawn path still starts at a root).
    """
    keep: set[BlockKey] | None = None
    if len(replica.blocks) > max_nodes:
        keep = set()
        for block in sorted(replica.blocks.values(), key=lambda b: b.stored_seq, reverse=True):
            chain = replica.prefix_of(block.block_hash)
            if len(keep | {b.block_hash for b in chain}) > max_nodes:
                break
            keep.update(b.block_hash for b in chain)
    children = replica.children()
    placed: dict[BlockKey, tuple[int, float]] = {}
    next_row = 0.0

    def place(key: BlockKey, depth: int) -> float:
        nonlocal next_row
        kids = [k for k in children.get(key, []) if keep is None or k in keep]
        if not kids:
            row = next_row
            next_row += 1
        else:
            rows = [place(kid, depth + 1) for kid in sorted(kids, key=lambda k: replica.blocks[k].stored_seq)]
            row = rows[0]
        placed[key] = (depth, row)
        return row

    stack_roots = [k for k in children.get(None, []) if keep is None or k in keep]
    for root in sorted(stack_roots, key=lambda k: replica.blocks[k].stored_seq):
        place(root, 0)
    return placed


def prefix_tree_figure(replica: ReplicaState, decode: Decode | None = None, *,
                       max_nodes: int = MAX_TREE_NODES, title: str | None = None) -> go.Figure:
    placed = tree_layout(replica, max_nodes)
    latest = replica.last_seq
    shapes: list[dict[str, object]] = []
    edge_x: list[float | None] = []
    edge_y: list[float | None] = []
    xs: list[float] = []
    ys: list[float] = []
    labels: list[str] = []
    label_colors: list[str] = []  # the theme's readable text colour on each node's fill
    hovers: list[str] = []
    for key, (depth, row) in placed.items():
        block = replica.blocks[key]
        state = "new" if block.stored_seq == latest else "cached"
        shapes.append(dict(type="rect", x0=depth - NODE_W / 2, x1=depth + NODE_W / 2, y0=row - NODE_H / 2,
                           y1=row + NODE_H / 2, fillcolor=TREE_COLORS[state], line=dict(width=0), layer="below"))
        text = block_text(block, decode)
        xs.append(depth)
        ys.append(row)
        labels.append(_clip(text))
        label_colors.append(text_color(TREE_STATES[state]))
        where = f" · block #{block.block_id}" if block.block_id is not None else ""
        hovers.append(f"hash {short_hash(key)}{where}<br>stored in batch {block.stored_seq}"
                      f"{' (×' + str(block.copies) + ')' if block.copies > 1 else ''}<br>{_clip(text, 200)}")
        if block.parent in placed:
            px, py = placed[block.parent]
            edge_x += [px + NODE_W / 2, depth - NODE_W / 2, None]
            edge_y += [py, row, None]
    # ghosts: blocks evicted in the last few batches, beside the parent they hung under when it is
    # still drawn, else in one row under the tree
    ghost_x: list[float] = []
    ghost_y: list[float] = []
    ghost_hover: list[str] = []
    rows_used = max((row for _, row in placed.values()), default=-1.0)
    orphan_row = rows_used + 1
    orphans = 0
    columns = max((d for d, _ in placed.values()), default=0) + 1
    beside: dict[BlockKey, int] = {}
    for ghost in recent_ghosts(replica):
        if ghost.parent in placed:
            depth, row = placed[ghost.parent][0] + 1, placed[ghost.parent][1]
            beside[ghost.parent] = beside.get(ghost.parent, 0) + 1
            row += 0.3 * (beside[ghost.parent] - 1)
        else:  # its parent is gone too: a row (or rows) of its own under the tree
            depth, row = orphans % columns, orphan_row + orphans // columns
            orphans += 1
        ghost_x.append(depth)
        ghost_y.append(row)
        ghost_hover.append(f"evicted in batch {ghost.removed_seq}<br>hash {short_hash(ghost.block_hash)}"
                           f"<br>{_clip(block_text(ghost, decode), 200)}")
    if orphans:
        rows_used = orphan_row + (orphans - 1) // columns
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=edge_x, y=edge_y, mode="lines", line=dict(color="#90a4ae", width=2),
                             hoverinfo="skip", name="parent → child"))
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="text", text=labels, textfont=dict(color=label_colors, size=11),
                             hovertext=hovers, hoverinfo="text", name="cached blocks"))
    if ghost_x:
        fig.add_trace(go.Scatter(x=ghost_x, y=ghost_y, mode="markers", hovertext=ghost_hover, hoverinfo="text",
                                 marker=dict(symbol="x", size=16, color=TREE_COLORS["evicted"]), name="evicted"))
        heading_note = f" · ✕ {len(ghost_x)} evicted in the last {GHOST_BATCHES} batches"
    else:
        heading_note = ""
    shown = len(placed)
    heading = title or (f"{replica.name or 'server'}: {len(replica.blocks)} cached blocks"
                        + (f" (newest {shown} drawn)" if shown < len(replica.blocks) else "") + heading_note)
    depth_max = max([d for d, _ in placed.values()] + ghost_x, default=0) + 1
    height_rows = max(rows_used + 1, 3)
    fig.update_layout(**base_layout(
        title=dict(text=heading), shapes=shapes, height=min(900, 160 + 34 * height_rows),
        xaxis=dict(title="block position in the prompt (0 = first block)", range=[-0.6, depth_max + 0.2],
                   dtick=1, zeroline=False, showgrid=False),
        yaxis=dict(visible=False, range=[height_rows - 0.4, -0.6]),
    ))
    if not placed and not ghost_x:
        fig.add_annotation(text="No cached block yet: send a request to the server.", showarrow=False,
                           x=0.5, y=0.5, xref="paper", yref="paper")
    return fig


def cache_history_figure(replica: ReplicaState, title: str | None = None) -> go.Figure:
    points = list(replica.history)
    seqs = [p.seq for p in points]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=seqs, y=[p.stored for p in points], name="stored", marker_color=TREE_COLORS["new"]))
    fig.add_trace(go.Bar(x=seqs, y=[-p.removed for p in points], name="removed", marker_color=TREE_COLORS["evicted"]))
    fig.add_trace(go.Scatter(x=seqs, y=[p.cached for p in points], name="cached after the batch", mode="lines+markers",
                             line=dict(color=TREE_COLORS["cached"], width=3)))
    clears = [p.seq for p in points if p.cleared]
    for seq in clears:
        fig.add_vline(x=seq, line_dash="dot", line_color="#424242")
    fig.update_layout(**base_layout(
        title=dict(text=title or f"{replica.name or 'server'}: blocks stored / removed per event batch"),
        # the legend above the plot and titles set off from their ticks: nothing overlaps an axis title
        barmode="relative", height=320, showlegend=True, margin=dict(l=60, r=10, t=70, b=50),
        legend=dict(orientation="h", x=0, y=1.02, xanchor="left", yanchor="bottom"),
        xaxis=dict(title=dict(text="event batch (sequence number)", standoff=10), automargin=True),
        yaxis=dict(title=dict(text="blocks", standoff=10), automargin=True),
    ))
    return fig
