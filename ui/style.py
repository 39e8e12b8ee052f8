"""The lab's few CSS rules (cards, status line, event log), with colours from viz.theme."""

from __future__ import annotations

from viz.theme import STATE_COLORS

LAB_CSS = f"""<style>
[data-testid=stMainBlockContainer] {{ padding-top: 3.2rem; }}
.lab-title {{ font-size: 1.6rem; font-weight: 700; line-height: 1.2; white-space: nowrap; }}
.lab-card {{ border-left: 6px solid {STATE_COLORS["in_use"]}; background: #f5f7fa; padding: 10px 14px;
            border-radius: 4px; font-size: 1.08rem; margin-bottom: 6px; }}
.lab-card-head {{ font-size: .85rem; color: #546e7a; margin-bottom: 4px; }}
.lab-tag {{ background: #263238; color: white; border-radius: 3px; padding: 1px 6px; font-size: .8rem;
           margin-right: 6px; }}
.lab-status {{ font-size: .95rem; color: #37474f; margin: 2px 0 4px 0; }}
.lab-log {{ list-style: none; padding-left: 0; font-size: .95rem; }}
.lab-log li {{ padding: 2px 4px; }}
</style>"""
