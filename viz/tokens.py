"""Tokens laid out as KV blocks: the picture of "which part of my prompt was reused".

Reusable by any page (Why did it miss?, Playground): give it the token texts, the block
size and one state per block, and it draws the tokens in rows of blocks, coloured by state
(``hit`` / ``computed`` / ``partial``, from :mod:`viz.theme`), with a short hash above each
block. It knows nothing about the engine.

Two renderings of one picture: :func:`token_blocks_figure` (Plotly) and
:func:`token_blocks_html` (plain HTML/CSS for ``st.html``). The HTML one is in the page's
own render, so it shows at once; a Plotly chart waits for the browser to load Plotly.js.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from html import escape

import plotly.graph_objects as go

from viz.theme import (
    OUTLINES,
    STATE_COLORS,
    STATE_GLYPHS,
    base_layout,
    legend_html,
    plain_text,
    state_tag,
    swatch_css,
    text_color,
)

#: The states a block of a request can be in, in legend order.
BLOCK_STATES = ("hit", "computed", "partial")

CELL_GAP = 0.08  # white space between tokens of one block (fraction of a cell)
BLOCK_GAP = 0.45  # space between blocks, in cells
ROW_HEIGHT = 1.9  # one row of blocks: label + cells + space
MAX_TOKEN_CHARS = 8
DENSE_ROW = 12  # more tokens than this in a row: cells get narrow on a 1024 px screen



def _clip(text: str, limit: int = MAX_TOKEN_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _block_label(index: int, label: str | None, block_size: int, physical_id: int | None = None) -> str:
    """``block 3 · 1a2b3c4d``; blocks of one or two tokens are too narrow for more than a few hex digits.

    With ``physical_id``: ``block 3 → #17 · 1a2b3c4d`` (logical block 3 lives in physical block 17).
    """
    if block_size < 3:
        return (label or "")[:4] if label else "—"
    name = f"<b>block {index}</b>" + (f" → #{physical_id}" if physical_id is not None else "")
    return f"{name} · {label}" if label else f"{name} · no hash yet"


def num_blocks(num_tokens: int, block_size: int) -> int:
    """Blocks needed for ``num_tokens`` tokens (the last one may be partial)."""
    return -(-num_tokens // block_size)


def _check_states(num_tokens: int, block_size: int, states: Sequence[str]) -> int:
    """The number of blocks, after checking there is one known state per block (``ValueError`` if not)."""
    if block_size < 1:
        raise ValueError(f"block_size must be at least 1, got {block_size}.")
    n_blocks = num_blocks(num_tokens, block_size)
    if len(states) != n_blocks:
        raise ValueError(f"Expected one state per block ({n_blocks}), got {len(states)}.")
    unknown = sorted(set(states) - set(BLOCK_STATES))
    if unknown:
        raise ValueError(f"Unknown block state(s) {unknown}; use {list(BLOCK_STATES)}.")
    return n_blocks


def token_blocks_figure(
    tokens_text: Sequence[str],
    block_size: int,
    states: Sequence[str],
    hash_labels: Sequence[str | None] | None = None,
    *,
    hover_hashes: Sequence[str | None] | None = None,
    marked_tokens: Collection[int] = (),
    title: str | None = None,
    tokens_per_row: int = 12,
    physical_ids: Sequence[int | None] | None = None,
    max_token_chars: int | None = None,
    mark: str = "differs",
) -> go.Figure:
    """Draw a request's tokens as blocks.

    Args:
        tokens_text: the text of each token, in order (words, or ids as strings).
        block_size: tokens per block; block ``i`` holds tokens ``[i*bs, (i+1)*bs)``.
        states: one of ``"hit"``, ``"computed"``, ``"partial"`` per block.
        hash_labels: a short label per block, drawn above it (``None``: "no hash yet").
        hover_hashes: the full hash per block, shown on hover.
        marked_tokens: token positions to outline (e.g. the first token that differs).
        title: figure title.
        tokens_per_row: wrap after this many tokens (whole blocks per row, at least one).
        physical_ids: the physical KV block backing each logical block (``None``: no slot yet),
            drawn as ``block 2 → #17``; the Playground passes them, the hash pages do not.
        max_token_chars: clip token texts to this many characters (default: by block size).

    Raises ``ValueError`` when ``states`` does not have one entry per block.
    """
    n_blocks = _check_states(len(tokens_text), block_size, states)
    labels = list(hash_labels) if hash_labels is not None else [None] * n_blocks
    hovers = list(hover_hashes) if hover_hashes is not None else labels
    physical = list(physical_ids) if physical_ids is not None else [None] * n_blocks
    clip_at = max_token_chars or (6 if block_size <= 2 else MAX_TOKEN_CHARS)
    dense = tokens_per_row > DENSE_ROW  # narrow cells: shorter, smaller token text so neighbours never overlap
    if dense:
        clip_at = min(clip_at, 4)

    blocks_per_row = max(1, tokens_per_row // block_size)
    row_width = blocks_per_row * block_size + (blocks_per_row - 1) * BLOCK_GAP

    def cell_x(position: int) -> float:
        block = position // block_size
        return (block % blocks_per_row) * (block_size + BLOCK_GAP) + position % block_size

    def row_y(block: int) -> float:
        return -(block // blocks_per_row) * ROW_HEIGHT

    shapes: list[dict] = []
    for position in range(len(tokens_text)):
        block = position // block_size
        x, y = cell_x(position), row_y(block)
        marked = position in marked_tokens
        shapes.append(
            dict(
                type="rect", layer="below", x0=x + CELL_GAP / 2, x1=x + 1 - CELL_GAP / 2, y0=y - 0.5, y1=y + 0.5,
                fillcolor=STATE_COLORS[states[block]],
                line=dict(color=OUTLINES[mark].color, width=OUTLINES[mark].width, dash=OUTLINES[mark].dash)
                if marked else dict(color=STATE_COLORS[states[block]], width=1),
            )
        )
    for block in range(n_blocks):
        x0 = cell_x(block * block_size)
        last = min(len(tokens_text), (block + 1) * block_size) - 1
        shapes.append(
            dict(type="rect", layer="below", x0=x0 - 0.04, x1=cell_x(last) + 1.04, y0=row_y(block) - 0.56,
                 y1=row_y(block) + 0.56, line=dict(color="#212121", width=2,
                 dash="dot" if states[block] == "partial" else "solid"), fillcolor="rgba(0,0,0,0)")
        )

    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            name="tokens",
            x=[cell_x(p) + 0.5 for p in range(len(tokens_text))],
            y=[row_y(p // block_size) for p in range(len(tokens_text))],
            mode="text",
            text=[plain_text(_clip(t, clip_at)) for t in tokens_text],
            textfont=dict(color=[text_color(states[p // block_size]) for p in range(len(tokens_text))],
                          size=11 if dense else None),
            hovertext=[plain_text(f"token {p}: {t!r} (block {p // block_size})") for p, t in enumerate(tokens_text)],
            hoverinfo="text",
            showlegend=False,
        )
    )
    fig.add_trace(
        go.Scatter(
            name="block labels",
            x=[cell_x(b * block_size) for b in range(n_blocks)],
            y=[row_y(b) + 0.82 for b in range(n_blocks)],
            mode="text",
            textposition="middle right",
            text=[_block_label(b, labels[b], block_size, physical[b]) for b in range(n_blocks)],
            hovertext=[
                f"block {b}: tokens {b * block_size}-{min(len(tokens_text), (b + 1) * block_size) - 1}<br>"
                + (f"physical KV block #{physical[b]}<br>" if physical[b] is not None else "")
                + (f"hash {hovers[b]}" if hovers[b] else "not full yet: no hash, so not cached")
                for b in range(n_blocks)
            ],
            hoverinfo="text",
            showlegend=False,
        )
    )
    for state in BLOCK_STATES:  # legend entries, in a fixed order on every figure
        fig.add_trace(
            go.Scatter(
                name=state_tag(state), x=[None], y=[None], mode="markers",
                marker=dict(symbol="square", size=16, color=STATE_COLORS[state]),
                showlegend=True, hoverinfo="skip",
            )
        )
    n_rows = num_blocks(n_blocks, blocks_per_row) if n_blocks else 1
    fig.update_layout(
        **base_layout(
            title=dict(text=title, x=0.01, xanchor="left") if title else None,
            shapes=shapes,
            showlegend=True,
            legend=dict(orientation="h", x=0, y=1.0, yanchor="bottom"),
            height=110 + 95 * n_rows,
            margin=dict(l=10, r=10, t=70 if title else 40, b=10),
        )
    )
    fig.update_xaxes(visible=False, range=[-0.2, row_width + 0.2], fixedrange=True)
    fig.update_yaxes(visible=False, range=[-(n_rows - 1) * ROW_HEIGHT - 0.7, 1.15], fixedrange=True)
    return fig


#: The stylesheet of :func:`token_blocks_html`, for a style-only ``st.html`` call of its own
#: (Streamlit strips ``<style>`` out of mixed HTML but keeps a style-only body).
TOKENS_CSS = (
    "<style>"
    ".pl-tokens { font-size: 15px; color: #212121; margin-bottom: 10px; }"
    ".pl-tokens .tb-title { font-weight: 700; margin-bottom: 2px; }"
    ".pl-tokens .tb-blocks { display: flex; flex-wrap: wrap; gap: 10px 14px; margin-top: 6px; }"
    ".pl-tokens .tb-block { border: 2px solid #212121; border-radius: 6px; padding: 3px; max-width: 100%; }"
    ".pl-tokens .tb-block[data-state=partial] { border-style: dashed; }"
    ".pl-tokens .tb-label { padding: 0 3px 3px; overflow-wrap: anywhere; }"
    ".pl-tokens .tb-label .h { font-family: ui-monospace, 'DejaVu Sans Mono', monospace; }"
    ".pl-tokens .tb-cells { display: flex; flex-wrap: wrap; gap: 3px; }"
    ".pl-tokens .tb-tok { padding: 3px 6px; border-radius: 3px; white-space: nowrap; min-width: 1.8em; text-align: center; }"
    f".pl-tokens .tb-tok.marked {{ outline: {OUTLINES['differs'].css}; outline-offset: 1px; }}"
    "</style>"
)


def token_blocks_html(
    tokens_text: Sequence[str],
    block_size: int,
    states: Sequence[str],
    hash_labels: Sequence[str | None] | None = None,
    *,
    hover_hashes: Sequence[str | None] | None = None,
    marked_tokens: Collection[int] = (),
    title: str | None = None,
    max_token_chars: int = MAX_TOKEN_CHARS,
) -> str:
    """The picture of :func:`token_blocks_figure` as HTML (style it with ``TOKENS_CSS``); all text escaped.

    Each block is a box headed ``✓ block 2 · 1a2b3c4d`` (the state's glyph, then its short
    hash, or "no hash yet"), holding its tokens in the state's fill; the tokens in
    ``marked_tokens`` get the dotted "first difference" outline. Blocks wrap to the width.
    """
    n_blocks = _check_states(len(tokens_text), block_size, states)
    labels = list(hash_labels) if hash_labels is not None else [None] * n_blocks
    hovers = list(hover_hashes) if hover_hashes is not None else labels
    blocks = []
    for block in range(n_blocks):
        state = states[block]
        start, end = block * block_size, min(len(tokens_text), (block + 1) * block_size)
        cells = "".join(
            f"<span class='tb-tok{' marked' if p in marked_tokens else ''}' style='{swatch_css(state)};"
            f"color:{text_color(state)}' title='{escape(f'token {p}: {tokens_text[p]!r}')}'>"
            f"{escape(_clip(tokens_text[p], max_token_chars))}</span>"
            for p in range(start, end)
        )
        label = labels[block]
        hover = f"block {block}: tokens {start}-{end - 1}\n" + (
            f"hash {hovers[block]}" if hovers[block] else "not full yet: no hash, so not cached")
        blocks.append(
            f"<div class='tb-block' data-state='{state}' title='{escape(hover)}'>"
            f"<div class='tb-label'>{STATE_GLYPHS[state]} <b>block {block}</b> · "
            + (f"<span class='h'>{escape(label)}</span>" if label else "no hash yet")
            + f"</div><div class='tb-cells'>{cells}</div></div>"
        )
    head = f"<div class='tb-title'>{escape(title)}</div>" if title else ""
    return (f"<div class='pl-tokens'>{head}{legend_html(BLOCK_STATES)}"
            f"<div class='tb-blocks'>{''.join(blocks)}</div></div>")
