"""The hash chain as plain HTML/CSS: r2's blocks hashed one after another and looked up.

Each row is one logical block. The left column is r1 (already run: its full blocks sit
in the hash table), the right column is r2, hashed block by block: parent hash + this
block's tokens + extra keys -> digest -> lookup (hit, or miss). A hash that differs from
r1's at the same position gets the dotted "differs" outline, so editing one token lights up
every later block: the chain carries the change forward.

Why HTML and not a Plotly figure: the page's picture then arrives in the same render as
its title. A Plotly chart made the browser fetch and parse Plotly.js (several MB) first, so
the chain stayed blank for a second or two after every cold load.

Stepping and Play still run in the browser, with no script: the step buttons are radio
inputs, and CSS derives what is shown from one integer, ``--step`` (how many of r2's full
blocks are hashed). Each r2 tile carries its own ordinal ``--j``; ``clamp()`` turns
``--step - --j`` into 0 or 1 for "revealed", and Play animates ``--step`` itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import TYPE_CHECKING

from teaching.pages.prefix_probe import changed_blocks
from teaching.scenarios.describe import describe_extra_keys
from viz.theme import (
    FONT_FAMILY,
    OUTLINES,
    PLAIN_OUTLINE,
    STATE_GLYPHS,
    legend_html,
    short_hash,
    swatch_css,
    text_color,
)

if TYPE_CHECKING:
    from teaching.pages.prefix_probe import BlockTrace

MAX_TOKEN_LINE = 30  # characters of a block's tokens shown in its tile (all of them on hover)
FRAME_S = 0.9  # seconds per hashed block when Play runs
PENDING_FILL = "white"
PENDING_LINE = "#9e9e9e"
ID = "hc"  # the prefix of the radio inputs' ids (one chain per page)


def short(block_hash: bytes | None) -> str:
    """The one short form of a hash (:func:`viz.theme.short_hash`)."""
    return short_hash(block_hash)


def _tokens_line(tokens: Sequence[str]) -> str:
    line = " ".join(tokens)
    return line if len(line) <= MAX_TOKEN_LINE else line[: MAX_TOKEN_LINE - 1] + "…"


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
    return " · ".join(parts)


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


def block_state(block: BlockTrace, who: str) -> str:
    """The theme state a block's tile is drawn in: r1's full blocks are cached; r2's hit or were computed."""
    if not block.is_full:
        return "partial"
    if who == "r1":
        return "cached_free"
    return "hit" if block.hit_block_id is not None else "computed"


def _hover(block: BlockTrace, who: str) -> str:
    head = f"{who} block {block.index}: tokens {block.start}-{block.end - 1}\n{' '.join(block.tokens_text)}"
    if not block.is_full:
        return head + "\npartial block: never hashed, so never cached"
    return (
        f"{head}\nparent: {block.parent_hash.hex() if block.parent_hash else '-'}"
        f"\nextra keys: {describe_extra_keys(block.extra_keys)}\nhash: {block.block_hash.hex() if block.block_hash else '-'}"
    )


def formula(block: BlockTrace, num_hits: int) -> str:
    """One hashing step in words: ``block 2 = H( parent #…, tokens (…), extra None ) = #… → ✗ miss`` (escaped HTML)."""
    return (
        f"<b>block {block.index}</b> = H( parent #{short(block.parent_hash)}, "
        f"tokens ({escape(_tokens_line(block.tokens_text))}), extra {escape(_extra_short(block.extra_keys) or 'None')} )"
        f" = <b>#{short(block.block_hash)}</b> → {escape(lookup_text(block, num_hits))}"
    )


def _start_text(none_hash: bytes | None) -> str:
    root = f" = #{short(none_hash)}" if none_hash else ""
    return f"Press ▶ Play to hash r2 block by block. Block 0's parent is NONE_HASH{root}, the hash of the seed."


def _tile(block: BlockTrace, who: str, *, ordinal: int | None = None, differs: bool = False) -> str:
    """One block's tile: its tokens, then ``◆ #hash · extra`` (or "partial: never hashed"), full details on hover."""
    state = block_state(block, who)
    tokens = escape(_tokens_line(block.tokens_text))
    if block.is_full:
        extra = _extra_short(block.extra_keys)
        second = f"{STATE_GLYPHS[state]} <b class='h'>#{short(block.block_hash)}</b>" + (f" · {escape(extra)}" if extra else "")
    else:
        second = f"{STATE_GLYPHS[state]} <i>partial: never hashed</i>"
    classes = ["hc-tile", who] + (["differs"] if differs else []) + (["chained"] if block.is_full and block.index else [])
    style = f"{swatch_css(state)};color:{text_color(state)}"
    pending = ""
    if ordinal is not None:  # an r2 block that Play reveals: covered until --step reaches it
        style += f";--j:{ordinal}"
        pending = f"<span class='hc-pending' aria-hidden='true'>{tokens}<br>#????????</span>"
    return (
        f"<div class='{' '.join(classes)}' data-state='{state}' style='{style}' title='{escape(_hover(block, who))}'>"
        f"<span class='t'>{tokens}</span><span class='s'>{second}</span>{pending}</div>"
    )


def hash_chain_css(num_full: int) -> str:
    """The chain's stylesheet for ``num_full`` hashed blocks (a ``<style>`` element of its own).

    Streamlit's ``st.html`` keeps a style-only body as a stylesheet but strips ``<style>`` out of
    mixed HTML, so the page passes this and :func:`hash_chain_html` in two calls. The per-step
    rules tie each radio to a value of ``--step``.
    """
    differs = OUTLINES["differs"]
    rules = [
        # '\\3c ' is "<" as a CSS escape: Streamlit's sanitizer drops a <style> whose text holds a "<".
        "@property --step { syntax: '\\3c integer>'; inherits: true; initial-value: 0; }",
        f"@keyframes hc-play {{ from {{ --step: 0; }} to {{ --step: {num_full}; }} }}",
        f".pl-chain {{ font-family: {FONT_FAMILY}; font-size: 15px; color: #212121; }}",
        ".pl-chain .hc-radio { position: absolute; opacity: 0; width: 1px; height: 1px; margin: 0; }",
        f".pl-chain .hc-body {{ --step: {num_full}; }}",
        f"#{ID}-play:checked ~ .hc-body {{ animation: hc-play {max(1, num_full) * FRAME_S:.1f}s linear forwards; }}",
        ".pl-chain .hc-steps { display: flex; flex-wrap: wrap; gap: 4px; align-items: center; margin: 2px 0 8px; }",
        ".pl-chain .hc-steps label { border: 1px solid #b0bec5; border-radius: 6px; padding: 2px 9px; cursor: pointer;"
        " background: white; white-space: nowrap; }",
        ".pl-chain .hc-steps .lbl { color: #546e7a; margin-right: 4px; white-space: nowrap; }",
        ".pl-chain .hc-formulas { display: grid; min-height: 2.6em; margin-bottom: 10px; overflow-wrap: anywhere; }",
        ".pl-chain .hc-f { grid-area: 1 / 1; background: #f5f7fa; border-left: 6px solid #263238; padding: 4px 10px;"
        " opacity: max(0, 1 - (var(--step) - var(--k)) * (var(--step) - var(--k))); }",
        ".pl-chain .hc-grid { display: grid; grid-template-columns: 6.2em minmax(0, 1fr) minmax(0, 1fr) 11.5em;"
        " column-gap: 12px; row-gap: 16px; align-items: center; }",
        ".pl-chain .hc-head { font-weight: 700; }",
        ".pl-chain .hc-label { font-weight: 700; white-space: nowrap; position: relative; padding-left: 1.1em; }",
        ".pl-chain .hc-label .cur { position: absolute; left: 0; opacity: max(0, 1 - (var(--step) - var(--j)) * (var(--step) - var(--j))); }",
        f".pl-chain .hc-tile {{ position: relative; border: 1px solid {PLAIN_OUTLINE}; border-radius: 6px;"
        " padding: 4px 8px; line-height: 1.3; min-width: 0; }",
        ".pl-chain .hc-tile .t, .pl-chain .hc-tile .s { display: block; overflow-wrap: anywhere; }",
        ".pl-chain .hc-tile .h { font-family: ui-monospace, 'DejaVu Sans Mono', monospace; }",
        ".pl-chain .hc-tile.chained::before { content: '↓'; position: absolute; top: -17px; left: 50%;"
        " transform: translateX(-50%); color: #616161; font-weight: 700; line-height: 1; }",
        f".pl-chain .hc-tile.differs::after {{ content: ''; position: absolute; inset: -5px; border: {differs.css};"
        " border-radius: 8px; pointer-events: none; }",
        ".pl-chain .hc-tile.r2.differs::after, .pl-chain .hc-lookup {"
        " opacity: clamp(0, var(--step) - var(--j) + 1, 1); transition: opacity .45s; }",
        f".pl-chain .hc-pending {{ position: absolute; inset: 0; border-radius: 6px; background: {PENDING_FILL};"
        f" border: 1px dashed {PENDING_LINE}; color: {PENDING_LINE}; padding: 4px 8px; overflow: hidden; overflow-wrap: anywhere;"
        " opacity: clamp(0, var(--j) - var(--step), 1); transition: opacity .45s; pointer-events: none; }",
        ".pl-chain .hc-legend { margin-top: 12px; }",
        ".pl-chain .hc-key { display: inline-flex; align-items: center; margin-right: 12px; white-space: nowrap;"
        " font-size: .9rem; }",
    ]
    for k in range(num_full + 1):  # the chosen step, and which button shows as pressed / focused
        rules.append(f"#{ID}-s{k}:checked ~ .hc-body {{ --step: {k}; }}")
        rules.append(f"#{ID}-s{k}:checked ~ .hc-body label[for={ID}-s{k}] {{ background: #263238; color: white; }}")
        rules.append(f"#{ID}-s{k}:focus-visible ~ .hc-body label[for={ID}-s{k}] {{ outline: 3px solid #7b3294; }}")
    rules.append(f"#{ID}-play:checked ~ .hc-body label[for={ID}-play] {{ background: #263238; color: white; }}")
    rules.append(f"#{ID}-play:focus-visible ~ .hc-body label[for={ID}-play] {{ outline: 3px solid #7b3294; }}")
    return "<style>" + "\n".join(rules) + "</style>"


def _legend() -> str:
    differs = OUTLINES["differs"]
    extra = (
        f"<span class='hc-key'><span style='width:14px;height:14px;border:{differs.css};margin-right:6px'></span>"
        "hash differs from r1's</span>"
        f"<span class='hc-key'><span style='width:16px;height:16px;border:1px dashed {PENDING_LINE};"
        f"background:{PENDING_FILL};margin-right:6px'></span>not hashed yet</span>"
    )
    return f"<div class='hc-legend'>{legend_html(['cached_free', 'hit', 'computed', 'partial'])} {extra}</div>"


def hash_chain_html(
    cached: Sequence[BlockTrace],
    probe: Sequence[BlockTrace],
    *,
    none_hash: bytes | None = None,
    names: tuple[str, str] = ("r1 (ran first, cached)", "r2 (hashed now, looked up)"),
) -> str:
    """Both chains side by side as one HTML string for ``st.html``: every user text escaped.

    Styled by :func:`hash_chain_css` (for as many full blocks as ``probe`` has). It opens with all of r2's full blocks hashed; the step buttons (radio inputs) show any
    earlier moment, ▶ Play hashes them one by one, ``FRAME_S`` seconds each.
    """
    full = [b for b in probe if b.is_full]
    num_full = len(full)
    num_hits = sum(1 for b in probe if b.hit_block_id is not None)
    changed = set(changed_blocks(cached, probe))
    ordinal = {b.index: j for j, b in enumerate(full, start=1)}

    radios = [f"<input type='radio' class='hc-radio' name='{ID}-step' id='{ID}-play' aria-label='Play'>"]
    radios += [
        f"<input type='radio' class='hc-radio' name='{ID}-step' id='{ID}-s{k}' aria-label='{k} blocks of r2 hashed'"
        + (" checked" if k == num_full else "") + ">"
        for k in range(num_full + 1)
    ]
    steps = (
        "<div class='hc-steps'>"
        f"<label for='{ID}-play' title='Hash r2 block by block'>▶ Play</label>"
        "<span class='lbl'>&nbsp;blocks of r2 hashed:</span>"
        + "".join(f"<label for='{ID}-s{k}'>{k}</label>" for k in range(num_full + 1))
        + "</div>"
    )
    formulas = [f"<div class='hc-f' style='--k:0'>{escape(_start_text(none_hash))}</div>"]
    formulas += [f"<div class='hc-f' style='--k:{ordinal[b.index]}'>{formula(b, num_hits)}</div>" for b in full]

    cells = [
        "<div></div>", f"<div class='hc-head'>{escape(names[0])}</div>",
        f"<div class='hc-head'>{escape(names[1])}</div>", "<div class='hc-head'>lookup</div>",
    ]
    for index in range(max(len(cached), len(probe))):
        a = cached[index] if index < len(cached) else None
        b = probe[index] if index < len(probe) else None
        j = ordinal.get(index)
        cur = "<span class='cur'>▶</span>" if j is not None else ""
        cells.append(f"<div class='hc-label' style='--j:{j or 0}'>{cur}block {index}</div>")
        cells.append(_tile(a, "r1") if a else "<div></div>")
        if b is None:
            cells += ["<div></div>", "<div></div>"]
            continue
        cells.append(_tile(b, "r2", ordinal=j, differs=index in changed))
        lookup_style = f" style='--j:{j}'" if j is not None else ""
        cells.append(f"<div class='hc-lookup'{lookup_style}>{escape(lookup_text(b, num_hits))}</div>")

    return (
        f"<div class='pl-chain'>{''.join(radios)}<div class='hc-body'>{steps}"
        f"<div class='hc-formulas'>{''.join(formulas)}</div>"
        f"<div class='hc-grid'>{''.join(cells)}</div>{_legend()}</div></div>"
    )
