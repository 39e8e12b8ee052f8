"""A colour legend as HTML chips, shared by every page (figures hide Plotly's own legend)."""

from __future__ import annotations

from collections.abc import Iterable
from html import escape

from viz.theme import STATE_COLORS, STATE_LABELS

POOL_STATES = ("null", "free", "cached_free", "in_use", "highlight")
TABLE_STATES = ("hit", "computed", "partial")


def legend_html(states: Iterable[str] = POOL_STATES) -> str:
    """Inline chips: coloured square + label, one per state."""
    chips = []
    for state in states:
        chips.append(
            "<span style='display:inline-flex;align-items:center;margin-right:12px;white-space:nowrap;font-size:.86rem'>"
            f"<span style='width:14px;height:14px;border-radius:3px;border:1px solid #90a4ae;"
            f"background:{STATE_COLORS[state]};display:inline-block;margin-right:6px'></span>"
            f"{escape(STATE_LABELS[state])}</span>"
        )
    return "<div style='line-height:1.8;display:inline'>" + "".join(chips) + "</div>"
