"""The groups view as HTML: one block table per KV cache group, released blocks, per-group hits.

Pure: :class:`teaching.pages.groups.GroupsView` in, an HTML string out (the page shows it with
``st.html``). A released slot shows the null block as a dashed ``∅``.
"""

from __future__ import annotations

from html import escape

from teaching.pages.groups import GroupsView

CSS = """
<style>
.kvg { font-family: system-ui, sans-serif; font-size: 14px; color: #1f2328; }
.kvg h4 { margin: 10px 0 4px; font-size: 17px; }
.kvg table { border-collapse: collapse; margin-bottom: 6px; }
.kvg td, .kvg th { padding: 2px 6px; text-align: center; }
.kvg th { font-weight: 600; text-align: left; }
.kvg .blk { display: inline-block; min-width: 26px; padding: 2px 4px; border: 1px solid #57606a;
            border-radius: 4px; background: #ddf4ff; }
.kvg .null { border-style: dashed; background: #fff; color: #8c959f; }
.kvg .note { color: #57606a; margin: 0 0 4px; }
.kvg .cut { background: #ffebe9; font-weight: 600; }
</style>
"""


def group_title(kind: str, window: int | None) -> str:
    return f"sliding window of {window} tokens" if kind == "sliding_window" else "full attention"


def groups_html(view: GroupsView) -> str:
    parts = [CSS, "<div class='kvg'>"]
    for group in view.groups:
        parts.append(f"<h4 data-group='{group.group_idx}'>Group {group.group_idx} · {escape(group_title(group.kind, group.sliding_window))}</h4>")
        if group.tables:
            parts.append("<table>")
            for rid, blocks in group.tables.items():
                cells = "".join(
                    "<td><span class='blk null' title='released: the null block stands here'>∅</span></td>" if b is None
                    else f"<td><span class='blk'>{b}</span></td>"
                    for b in blocks
                )
                parts.append(f"<tr><th>{escape(rid)}</th>{cells}</tr>")
            parts.append("</table>")
        else:
            parts.append("<p class='note'>No live request holds blocks in this group.</p>")
        if group.kind == "sliding_window":
            released = ", ".join(str(b) for b in group.released) or "none yet"
            parts.append(f"<p class='note released'>Released by the window so far: {escape(released)}</p>")
    if view.hits:
        header = "".join(f"<th>group {g.group_idx} alone</th>" for g in view.groups)
        parts.append("<h4>If each prompt came again now: cached tokens</h4><table class='hits'>")
        parts.append(f"<tr><th>request</th><th>prompt</th>{header}<th>all groups</th></tr>")
        for hit in view.hits:
            cells = "".join(
                f"<td class='{'cut' if tokens > hit.agreed else ''}'>{tokens}</td>" for tokens in hit.per_group
            )
            parts.append(f"<tr><th>{escape(hit.request_id)}</th><td>{hit.num_prompt_tokens}</td>{cells}<td><b>{hit.agreed}</b></td></tr>")
        parts.append("</table><p class='note'>Red: a hit this group allows that another group does not.</p>")
    parts.append(f"<p class='note'>{view.num_free_blocks} blocks in the free queue, shared by all groups.</p></div>")
    return "".join(parts)
