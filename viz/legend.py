"""Legend chips for the pages, generated from :mod:`viz.theme` (figures hide Plotly's own legend)."""

from __future__ import annotations

from viz.theme import legend_html

POOL_STATES = ("null", "free", "cached_free", "in_use")
TABLE_STATES = ("hit", "computed", "partial")

__all__ = ["POOL_STATES", "TABLE_STATES", "legend_html"]
