"""The hash chain, animated: r2's blocks hashed one after another and looked up.

Each row is one logical block. The left column is r1 (already run: its full blocks sit
in the hash table), the right column is r2, hashed block by block: parent hash + this
block's tokens + extra keys -> digest -> lookup (hit, or miss). A hash that differs from
r1's at the same position gets a highlighted outline, so editing one token lights up
every later block: the chain carries the change forward.

Play and the step slider run in the browser (Plotly animation frames, fixed axes); the
``step`` argument picks which frame the static figure shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import plotly.graph_objects as go

from teaching.describe import describe_extra_keys
from viz.theme import OUTLINES, STATE_COLORS, STATE_LABELS, base_layout, plain_text, short_hash

if TYPE_CHECKING:
    from teaching.prefix_probe import BlockTrace

ROW_STEP = 1.35  # vertical distance between block rows
BOX_HEIGHT = 1.0
LABEL_X = 0.0
A_X0, A_W = 1.5, 4.6  # r1 column
B_X0, B_W = 6.4, 4.6  # r2 column
LOOKUP_X = 11.2
X_MAX = 14.0
MAX_TOKEN_LINE = 30
PENDING_FILL = "white"
PENDING_LINE = "#9e9e9e"
TEXT_DARK = "#212121"


def short(block_hash: bytes | None) -> str:
    """The one short form of a hash (:func:`viz.theme.short_hash`)."""
    return short_hash(block_hash)


def _tokens_line(tokens: Sequence[str]) -> str:
    line = " ".join(tokens)
    return plain_text(line if len(line) <= MAX_TOKEN_LINE else line[: MAX_TOKEN_LINE - 1] + "…")


def _extra_short(extra_keys: tuple | None) -> str:
    """``(("lora", "a", None), ("cache_salt", "s"))`` -> ``lora a · salt s``."""
    if not extra_keys:
        return ""
    parts = []
    for key in extra_keys:
        if key[0] == "lora":
            parts.append(f"lora {key[1]}")
        elif key[0] == "cache_salt":
            parts.append(f"salt {key[1]}")
        else:
            parts.append(str(key[0]))
    return plain_text(" · ".join(parts))


def _box_text(block: BlockTrace) -> str:
    tokens = _tokens_line(block.tokens_text)
    if not block.is_full:
        return f"{tokens}<br><i>partial: never hashed</i>"
    extra = _extra_short(block.extra_keys)
    return f"{tokens}<br><b>#{short(block.block_hash)}</b>" + (f" · {extra}" if extra else "")


def _hover(block: BlockTrace, who: str) -> str:
    head = f"{who} block {block.index}: tokens {block.start}-{block.end - 1}<br>{plain_text(' '.join(block.tokens_text))}"
    if not block.is_full:
        return head + "<br>partial block: never hashed, so never cached"
    return (
        f"{head}<br>parent: {block.parent_hash.hex() if block.parent_hash else '-'}"
        f"<br>extra keys: {describe_extra_keys(block.extra_keys)}<br>hash: {block.block_hash.hex() if block.block_hash else '-'}"
    )


def lookup_text(block: BlockTrace, num_hits: int | None = None) -> str:
    """What the lookup of one r2 block found, in a few words.

    A block that is in the table right after the run of hits was left out by the
    last-token rule (the lookup stops only at a miss or at that cap).
    """
    if not block.is_full:
        return "never hashed"
    if block.hit_block_id is not None:
        return f"✓ hit: block #{block.hit_block_id}"
    if block.in_table:
        return "in table: last-token rule" if block.index == num_hits else "in table, after a miss"
    return "✗ miss"


def changed_blocks(cached: Sequence[BlockTrace], probe: Sequence[BlockTrace]) -> list[int]:
    """Indices of r2's full blocks whose hash differs from r1's block at the same index."""
    return [
        b.index for b in probe
        if b.is_full and (b.index >= len(cached) or cached[b.index].block_hash != b.block_hash)
    ]


def _state(block: BlockTrace) -> str:
    if not block.is_full:
        return "partial"
    return "hit" if block.hit_block_id is not None else "computed"


def _row_y(index: int) -> float:
    return -index * ROW_STEP


def _formula(probe: Sequence[BlockTrace], done: int, none_hash: bytes | None) -> str:
    full = [b for b in probe if b.is_full]
    num_hits = sum(1 for b in probe if b.hit_block_id is not None)
    if done == 0:
        root = f" = {short(none_hash)}" if none_hash else ""
        return (
            "Press ▶ to hash r2 block by block. Block 0's parent is NONE_HASH"
            f"{root}, the hash of the seed."
        )
    block = full[done - 1]
    return (
        f"<b>block {block.index}</b> = H( parent #{short(block.parent_hash)}, "
        f"tokens ({_tokens_line(block.tokens_text)}), extra {_extra_short(block.extra_keys) or 'None'} )"
        f" = <b>#{short(block.block_hash)}</b>  →  {lookup_text(block, num_hits)}"
    )


def _probe_frame(
    cached: Sequence[BlockTrace], probe: Sequence[BlockTrace], done: int, none_hash: bytes | None
) -> list[go.Scatter | go.Bar]:
    """Traces 1-4 (the animated ones) after ``done`` full blocks of r2 were hashed."""
    changed = set(changed_blocks(cached, probe))
    num_hits = sum(1 for b in probe if b.hit_block_id is not None)
    fills, lines, widths, texts, text_colors, lookups, labels = [], [], [], [], [], [], []
    for block in probe:
        revealed = not block.is_full or block.index < done
        current = block.is_full and block.index == done - 1
        if revealed:
            state = _state(block)
            fills.append(STATE_COLORS[state])
            text_colors.append(TEXT_DARK if state == "partial" else "white")
            texts.append(_box_text(block))
            is_changed = block.index in changed
            lines.append(OUTLINES["differs"].color if is_changed else TEXT_DARK)
            widths.append(OUTLINES["differs"].width + 1 if is_changed else 1)
            lookups.append(lookup_text(block, num_hits))
        else:
            fills.append(PENDING_FILL)
            text_colors.append(PENDING_LINE)
            texts.append(f"{_tokens_line(block.tokens_text)}<br>#????????")
            lines.append(PENDING_LINE)
            widths.append(1)
            lookups.append("")
        labels.append(f"{'▶ ' if current else ''}<b>block {block.index}</b>")
    ys = [_row_y(b.index) for b in probe]
    text_only = dict(mode="text", textposition="middle right", hoverinfo="skip", showlegend=False)
    # Every attribute is repeated in every frame, so a frame never depends on merge rules.
    return [
        go.Bar(
            name="r2", orientation="h", x=[B_W] * len(probe), base=[B_X0] * len(probe), y=ys, width=BOX_HEIGHT,
            marker=dict(color=fills, line=dict(color=lines, width=widths)),
            text=texts, textfont=dict(color=text_colors), textposition="inside", insidetextanchor="middle",
            hovertext=[_hover(b, "r2") for b in probe], hoverinfo="text", showlegend=False,
        ),
        go.Scatter(name="lookup", x=[LOOKUP_X] * len(probe), y=ys, text=lookups, **text_only),
        go.Scatter(name="labels", x=[LABEL_X] * len(probe), y=ys, text=labels, **text_only),
        go.Scatter(name="formula", x=[LABEL_X], y=[1.9], text=[_formula(probe, done, none_hash)], **text_only),
    ]


def hash_chain_figure(
    cached: Sequence[BlockTrace],
    probe: Sequence[BlockTrace],
    *,
    step: int | None = None,
    none_hash: bytes | None = None,
    names: tuple[str, str] = ("r1 (ran first, cached)", "r2 (hashed now, looked up)"),
    frame_ms: int = 900,
) -> go.Figure:
    """Both chains side by side, with one animation frame per hashed block of r2.

    ``step`` is how many of r2's full blocks the static picture shows as hashed
    (default: all of them). Frame ``k`` shows ``k`` blocks hashed.
    """
    num_full = sum(1 for b in probe if b.is_full)
    step = num_full if step is None else max(0, min(step, num_full))
    n_rows = max(len(cached), len(probe), 1)

    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            name=names[0], orientation="h", x=[A_W] * len(cached), base=[A_X0] * len(cached),
            y=[_row_y(b.index) for b in cached], width=BOX_HEIGHT,
            marker=dict(
                color=[STATE_COLORS["cached_free" if b.is_full else "partial"] for b in cached],
                line=dict(color=TEXT_DARK, width=1),
            ),
            text=[_box_text(b) for b in cached], textposition="inside", insidetextanchor="middle",
            textfont=dict(color=TEXT_DARK), hovertext=[_hover(b, "r1") for b in cached], hoverinfo="text",
            showlegend=False,
        )
    )
    fig.add_traces(_probe_frame(cached, probe, step, none_hash))
    # Column headings and the chain arrows never change: they live in the layout.
    annotations = [
        dict(x=A_X0 + A_W / 2, y=1.0, text=f"<b>{names[0]}</b>", showarrow=False),
        dict(x=B_X0 + B_W / 2, y=1.0, text=f"<b>{names[1]}</b>", showarrow=False),
        dict(x=LOOKUP_X, y=1.0, text="<b>lookup</b>", showarrow=False, xanchor="left"),
    ]
    for column_x, blocks in ((A_X0 + A_W / 2, cached), (B_X0 + B_W / 2, probe)):
        for block in blocks[1:]:
            if block.is_full:  # a partial block is never hashed: no parent link
                annotations.append(
                    dict(
                        x=column_x, y=_row_y(block.index) + BOX_HEIGHT / 2, ax=column_x,
                        ay=_row_y(block.index - 1) - BOX_HEIGHT / 2, xref="x", yref="y", axref="x", ayref="y",
                        showarrow=True, arrowhead=2, arrowsize=1.2, arrowwidth=2, arrowcolor="#616161", text="",
                    )
                )
    legend_items = [
        (STATE_LABELS["cached_free"] + " (r1)", STATE_COLORS["cached_free"], TEXT_DARK),
        (STATE_LABELS["hit"], STATE_COLORS["hit"], STATE_COLORS["hit"]),
        ("miss: computed", STATE_COLORS["computed"], STATE_COLORS["computed"]),
        (STATE_LABELS["partial"], STATE_COLORS["partial"], STATE_COLORS["partial"]),
        ("hash differs from r1 (thick outline)", "white", OUTLINES["differs"].color),
        ("not hashed yet", PENDING_FILL, PENDING_LINE),
    ]
    for name, fill, line in legend_items:
        fig.add_trace(
            go.Scatter(
                name=name, x=[None], y=[None], mode="markers", showlegend=True, hoverinfo="skip",
                marker=dict(symbol="square", size=18, color=fill, line=dict(color=line, width=3)),
            )
        )
    frames = [
        go.Frame(name=str(k), data=_probe_frame(cached, probe, k, none_hash), traces=[1, 2, 3, 4])
        for k in range(num_full + 1)
    ]
    fig.frames = frames
    still = {"frame": {"duration": 0, "redraw": True}, "mode": "immediate", "transition": {"duration": 0}}
    fig.update_layout(
        **base_layout(
            barmode="overlay",
            showlegend=True,
            legend=dict(orientation="h", x=0, y=1.0, yanchor="bottom"),
            annotations=annotations,
            height=260 + 78 * n_rows,
            margin=dict(l=10, r=10, t=70, b=90),
            uniformtext=dict(minsize=12, mode="show"),
            updatemenus=[
                dict(
                    type="buttons", direction="left", x=0, y=0, xanchor="left", yanchor="top",
                    pad=dict(t=10, r=10), showactive=False,
                    buttons=[
                        dict(label="▶ Play", method="animate", args=[None, {
                            "frame": {"duration": frame_ms, "redraw": True}, "fromcurrent": False,
                            "transition": {"duration": 0}, "mode": "immediate"}]),
                        dict(label="❚❚ Pause", method="animate", args=[[None], still]),
                    ],
                )
            ],
            sliders=[
                dict(
                    active=step, x=0.2, y=0, len=0.8, xanchor="left", yanchor="top", pad=dict(t=10),
                    currentvalue=dict(prefix="blocks of r2 hashed: ", visible=True, xanchor="right"),
                    steps=[dict(label=str(k), method="animate", args=[[str(k)], still]) for k in range(num_full + 1)],
                )
            ],
        )
    )
    fig.update_xaxes(visible=False, range=[-0.1, X_MAX], fixedrange=True)
    fig.update_yaxes(visible=False, range=[_row_y(n_rows - 1) - 0.8, 2.4], fixedrange=True)
    return fig
