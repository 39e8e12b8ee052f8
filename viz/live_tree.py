"""A replica's prefix cache as an icicle of runs (:mod:`teaching.live.radix`): readable at 10,000 blocks.

Left to right is deeper into the prompt; each rectangle is one unbranched run of blocks, as tall
as the blocks under it. A label is the run's own first words (past what its drawn siblings share,
so branches never read alike) and its block count; Plotly hides a label that does not fit its
rectangle (``uniformtext`` mode ``hide``), so labels never overlap. Clicking a rectangle zooms
into it in the browser (no rerun); branches left out are folded into one "+N more" rectangle.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import plotly.graph_objects as go

from teaching.live.radix import RadixEdge, View, distinct_start
from teaching.live.state import ReplicaState
from viz.theme import STATE_COLORS, plain_text, short_hash

Decode = Callable[[Sequence[int]], str]

#: Colours: a run with a block stored in the latest batch, an older run, folded branches, the frame.
RUN_COLORS = {"cached": STATE_COLORS["cached_free"], "new": STATE_COLORS["computed"], "fold": "#9e9e9e",
              "root": "#546e7a"}
LABEL_WORD_TOKENS = 10
#: Shared tokens kept before the first one where siblings differ ("Student 1" | "Student 2", not "1" | "2").
CONTEXT_TOKENS = 3
HOVER_CHARS = 240
MIN_LABEL_PX = 10
FRAME_ID = "cache"
LABEL_ROW_PX = 20
MAX_HEIGHT = 900


def _text(tokens: Sequence[int], decode: Decode | None) -> str:
    if decode is None:
        return " ".join(str(t) for t in tokens)
    try:
        return decode(list(tokens))
    except Exception:  # a tokenizer that does not fit these ids: show the ids instead
        return _text(tokens, None)


def _clean(text: str) -> str:
    return " ".join(text.replace("\n", " ↵ ").split())


def clip_words(text: str, limit: int) -> str:
    """At most ``limit`` characters, cut at a word boundary where one is near, with an ellipsis."""
    text = _clean(text)
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip() + "…"


def run_labels(replica: ReplicaState, view: View, decode: Decode | None, chars: int) -> dict[str, str]:
    """Each drawn run's words (from where it parts from its drawn siblings) and block count."""
    by_parent: dict[str | None, list[RadixEdge]] = {}
    for edge in view.edges:
        by_parent.setdefault(edge.parent.id if edge.parent else None, []).append(edge)
    labels: dict[str, str] = {}
    for siblings in by_parent.values():
        firsts = [replica.blocks[edge.keys[0]].token_ids for edge in siblings]
        skip = max(0, distinct_start(list(firsts)) - CONTEXT_TOKENS)
        texts = {}
        for edge in siblings:
            tokens = [t for key in edge.keys[:2] for t in replica.blocks[key].token_ids]  # words may cross a block
            texts[edge.id] = ("…" if skip else "") + _clean(_text(tokens[skip: skip + LABEL_WORD_TOKENS], decode))
        for edge in siblings:
            count = f" · {edge.blocks}"
            room = max(4, chars - len(count))
            label = clip_words(texts[edge.id], room)
            if sum(clip_words(text, room) == label for text in texts.values()) > 1:
                # the same words under other prefixes (their parents were evicted): the hash tells them apart
                tag = f" #{short_hash(edge.keys[0])}"
                label = clip_words(texts[edge.id], max(4, room - len(tag))) + tag
            labels[edge.id] = plain_text(label) + count  # Plotly reads some HTML in labels: escape it
    return labels


def icicle_figure(replica: ReplicaState, view: View, decode: Decode | None = None, *, height: int = 460,
                  levels: int = 4, label_chars: int = 24) -> go.Figure:
    """The view as a Plotly icicle: a frame for the whole cache (or the zoomed run), then the runs."""
    zoom = ""
    if view.root is not None:
        zoom = f" · zoomed into one branch (from block {view.root.start})"
    # one root: Plotly gives several roots an invisible column of their own, so a frame is drawn
    # instead (a zoomed view's root is its one run)
    frame = "" if view.root is not None else FRAME_ID
    name = plain_text(replica.name or "server")
    ids: list[str] = [frame] if frame else []
    parents: list[str] = [""] if frame else []
    values: list[int] = [view.blocks] if frame else []
    labels: list[str] = [f"{name} · {view.blocks}"] if frame else []
    colors: list[str] = [RUN_COLORS["root"]] if frame else []
    hovers: list[str] = [f"{view.blocks} cached blocks · {len(view.edges)} runs drawn"] if frame else []
    words = run_labels(replica, view, decode, label_chars)
    latest = replica.last_seq
    for edge in view.edges:
        ids.append(edge.id)
        parents.append(edge.parent.id if edge.parent is not None and edge is not view.root else frame)
        values.append(edge.subtree_blocks)
        labels.append(words[edge.id])
        colors.append(RUN_COLORS["new" if edge.newest_seq == latest else "cached"])
        first = replica.blocks[edge.keys[0]]
        text = _clean(_text([t for key in edge.keys[:4] for t in replica.blocks[key].token_ids], decode))
        where = "its prefix was evicted; " if edge.orphan else ""
        hovers.append(f"<b>{edge.blocks} blocks</b> (blocks {edge.start}–{edge.end - 1} of the prompt; {where}"
                      f"{edge.subtree_blocks} with what follows, {edge.leaves} cached prefixes)<br>"
                      f"first block {short_hash(first.block_hash)}, newest store in batch {edge.newest_seq}<br>"
                      f"{plain_text(clip_words(text, HOVER_CHARS))}")
    for fold in view.folds:
        ids.append(fold.id)
        parents.append(fold.parent.id if fold.parent is not None and fold.parent.id in words else frame)
        values.append(fold.blocks)
        labels.append(f"+{fold.edges} more · {fold.blocks}")
        colors.append(RUN_COLORS["fold"])
        hovers.append(f"{fold.edges} smaller branches, {fold.blocks} blocks: not drawn (zoom in to see them)")
    fig = go.Figure(go.Icicle(
        ids=ids, labels=labels, parents=parents, values=values, branchvalues="total", maxdepth=levels,
        marker=dict(colors=colors, line=dict(color="white", width=1)), customdata=hovers,
        hovertemplate="%{customdata}<extra></extra>", textinfo="label", textfont=dict(color="white", size=12),
        insidetextfont=dict(color="white", size=12), tiling=dict(orientation="h", pad=1), sort=False,
        pathbar=dict(visible=True, textfont=dict(size=12)),
    ))
    # tall enough that the thinnest drawn branch can hold a label (Plotly hides it otherwise)
    thinnest = min((v / max(view.blocks, 1) for v in values if v), default=1.0)
    height = int(min(MAX_HEIGHT, max(height, LABEL_ROW_PX / thinnest + 60)))
    title = f"{name} · {view.blocks} blocks{zoom}"
    fig.update_layout(title=dict(text=title, x=0, xanchor="left", font=dict(size=14)),
                      height=height, margin=dict(l=4, r=4, t=56, b=4), paper_bgcolor="white",
                      uniformtext=dict(minsize=MIN_LABEL_PX, mode="hide"), font=dict(family="DejaVu Sans, sans-serif"))
    return fig


def branch_choices(replica: ReplicaState, edges: Sequence[RadixEdge], decode: Decode | None,
                   count: int = 12, chars: int = 44) -> list[tuple[str, str]]:
    """(edge id, label) of the ``count`` biggest branches that branch again, for a "zoom into" box."""
    ranked = sorted((e for e in edges if e.children), key=lambda e: -e.subtree_blocks)[:count]
    choices = []
    for edge in ranked:
        tokens = [t for key in edge.keys[:2] for t in replica.blocks[key].token_ids]
        choices.append((edge.id, f"{clip_words(_text(tokens, decode), chars)} · {edge.subtree_blocks} blocks "
                                 f"from block {edge.start}"))
    return choices
