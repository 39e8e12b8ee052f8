"""One palette for every view, so a colour means the same thing on every page.

Chosen to stay distinct for the common colour-vision deficiencies and on a projector.
"""

from __future__ import annotations

from html import escape

#: Block / token states, used by every figure and legend.
STATE_COLORS: dict[str, str] = {
    "hit": "#2e7d32",  # served from the prefix cache
    "computed": "#1565c0",  # computed by the model this request
    "partial": "#9e9e9e",  # tail block that is not full: never cached
    "free": "#eceff1",  # in the free queue, no hash: nothing to lose
    "cached_free": "#ffb300",  # in the free queue but still hashed: hittable until evicted
    "in_use": "#5c6bc0",  # held by at least one request
    "evicted": "#d32f2f",  # hash dropped when the block was reused
    "null": "#424242",  # block 0, never used
    "highlight": "#ff4081",  # linked selection across views
}

STATE_LABELS: dict[str, str] = {
    "hit": "cache hit",
    "computed": "computed",
    "partial": "partial (never cached)",
    "free": "free, empty",
    "cached_free": "free, still cached",
    "in_use": "in use",
    "evicted": "evicted",
    "null": "null block",
    "highlight": "selected",
}

FONT_SIZE = 15  # readable at a projector's resolution
FONT_FAMILY = "Inter, Segoe UI, Helvetica, Arial, sans-serif"


def base_layout(**overrides: object) -> dict[str, object]:
    """Layout settings shared by every figure."""
    layout: dict[str, object] = dict(
        font=dict(size=FONT_SIZE, family=FONT_FAMILY),
        margin=dict(l=10, r=10, t=40, b=10),
        plot_bgcolor="white",
        paper_bgcolor="white",
        showlegend=False,
    )
    layout.update(overrides)
    return layout


def plain_text(text: str) -> str:
    """User or model text for a Plotly label or hover: shown as typed, never as markup.

    Plotly reads a subset of HTML in text (``<a href>``, ``<b>``, ``<br>``, ...), so a token like
    ``<a href="...">`` would become a link. Escaped, it reads the same and does nothing.
    """
    return escape(text, quote=False)
