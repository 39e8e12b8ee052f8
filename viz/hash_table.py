"""The hash table (``BlockHashToBlockMap``): hash -> block ids, duplicates visible.

A newly full block whose hash is already cached is still inserted (block tables are
append-only), so one hash can map to several blocks; lookups return the first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import plotly.graph_objects as go

from engine.timeline import CacheSnapshot
from teaching.scenarios.describe import TokenText, tokens_label
from viz.blocks import as_id_set
from viz.theme import OUTLINES, base_layout, plain_text, short_hash

SELECTED_ROW = OUTLINES["selected"].color + "33"  # the selection colour, translucent


@dataclass(frozen=True)
class HashRow:
    """One hash-table entry, ready for a table widget."""

    short_hash: str
    full_hash: str
    block_ids: list[int]
    tokens: str
    duplicate: bool

    @property
    def blocks_label(self) -> str:
        ids = ", ".join(str(b) for b in self.block_ids)
        return f"{ids}  (duplicate: lookups use {self.block_ids[0]})" if self.duplicate else ids


def hash_table_rows(
    snapshot: CacheSnapshot,
    *,
    contents: Mapping[bytes, list[int]] | None = None,
    token_text: TokenText | None = None,
) -> list[HashRow]:
    """Entries in insertion order."""
    rows = []
    for block_hash, block_ids in snapshot.hash_table.items():
        if not block_ids:
            continue
        rows.append(
            HashRow(
                short_hash=short_hash(block_hash), full_hash=block_hash.hex(), block_ids=list(block_ids),
                tokens=tokens_label(contents.get(block_hash) if contents else None, token_text),
                duplicate=len(block_ids) > 1,
            )
        )
    return rows


def hash_table_figure(
    snapshot: CacheSnapshot,
    highlight: int | Iterable[int] | None = None,
    *,
    contents: Mapping[bytes, list[int]] | None = None,
    token_text: TokenText | None = None,
    title: str | None = "Hash table (hash → blocks)",
) -> go.Figure:
    """A table: short hash | block ids | tokens. Rows holding a highlighted block use the
    selection colour; duplicate rows are tinted."""
    selected = as_id_set(highlight)
    rows = hash_table_rows(snapshot, contents=contents, token_text=token_text)
    fills = []
    for row in rows:
        if selected & set(row.block_ids):
            fills.append(SELECTED_ROW)
        elif row.duplicate:
            fills.append("#fff3e0")
        else:
            fills.append("white")
    font_colors = ["#212121" for f in fills]
    if not rows:
        cells = [["(empty)"], [""], ["no block is cached yet"]]
        fills, font_colors = ["white"], ["#616161"]
    else:
        cells = [[r.short_hash for r in rows], [r.blocks_label for r in rows], [plain_text(r.tokens) for r in rows]]
    fig = go.Figure(
        go.Table(
            columnwidth=[1.2, 1.6, 2.4],
            header=dict(values=["<b>hash</b>", "<b>block(s)</b>", "<b>tokens in the block</b>"],
                        fill_color="#eceff1", align="left", font=dict(size=14), height=30),
            cells=dict(values=cells, fill_color=[fills] * 3, font=dict(size=14, color=[font_colors] * 3),
                       align="left", height=28),
        )
    )
    fig.update_layout(
        **base_layout(title=dict(text=title, x=0.01) if title else None,
                      height=30 + 29 * max(1, len(rows)) + (60 if title else 20),
                      margin=dict(l=10, r=10, t=45 if title else 10, b=5))
    )
    return fig
