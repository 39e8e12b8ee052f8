"""The two-tier view as HTML: the device pool's blocks above, the host tier's below.

A pure function of :class:`teaching.pages.second_tier.TierView`; blocks that just spilled into the tier
and requests that just loaded blocks back are marked, so the movement between the tiers reads at a
glance.
"""

from __future__ import annotations

from html import escape

from teaching.pages.second_tier import TierView

CSS = """<style>
.tt-row{display:flex;flex-wrap:wrap;gap:6px;margin:4px 0 14px 0}
.tt-block{border:2px solid #8aa4c8;border-radius:6px;padding:4px 6px;min-width:82px;font-size:13px;background:#f4f7fb}
.tt-block.empty{color:#9aa3ad;border-style:dashed;background:white}
.tt-block.used{border-color:#2e6bd6}
.tt-block.new{border-color:#d98a00;background:#fff4dd}
.tt-tier{font-weight:600;margin-top:6px}
.tt-note{font-size:14px;margin:2px 0}
</style>"""


def two_tier_html(view: TierView) -> str:
    device = "".join(
        f"<div class='tt-block {'used' if b.ref_cnt else '' if b.words else 'empty'}'>"
        f"<b>#{b.block_id}</b> {escape(b.words) or 'free'}</div>" for b in view.device)
    spilled = set(view.spilled)
    host = "".join(f"<div class='tt-block {'new' if w in spilled else ''}'>{escape(w)}</div>" for w in view.host) \
        or "<div class='tt-block empty'>empty</div>"
    notes = []
    if view.spilled:
        notes.append(f"Spilled to the host tier: {len(view.spilled)} block(s), " + ", ".join(map(escape, view.spilled)))
    if view.evicted_from_host:
        notes.append(f"Evicted from the host tier: {', '.join(map(escape, view.evicted_from_host))}")
    for request_id, tokens in view.loaded.items():
        notes.append(f"Loaded back: {escape(request_id)} got {tokens} tokens from the host tier into fresh device blocks")
    return (CSS + "<div class='tt-tier'>Device pool (GPU)</div>" + f"<div class='tt-row'>{device}</div>"
            + f"<div class='tt-tier'>Host tier (CPU), {len(view.host)} blocks</div><div class='tt-row'>{host}</div>"
            + "".join(f"<div class='tt-note'>{n}</div>" for n in notes))
