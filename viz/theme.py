"""PrefixLab's one visual language: every colour, outline, glyph, pattern and hash length.

Every page and figure takes its look from here, so one colour means one thing everywhere:

* a **fill** is a block's state (``STATE_COLORS``), always paired with a **glyph**
  (``STATE_GLYPHS``) and, where two states are close, a **pattern** (``STATE_PATTERNS``), so a
  state reads with colour removed (greyscale print, colour-vision deficiency);
* an **outline** is why a block is marked (``OUTLINES``): the current event touched it, you
  selected it, or it is the first place two inputs differ; outlines differ by dash, not hue alone;
* **series** colours (``SERIES_COLORS``) name settings in charts (cache off / vLLM / classic) and
  are never used for a block state.

The fills are Okabe & Ito's colour-blind-safe set plus tints. ``tests/viz/test_theme.py`` checks
them with a colour-vision simulation (Machado et al. 2009, :mod:`viz.colorvision`): every pair of
state fills keeps a CIE76 distance of at least ``MIN_DELTA_E`` under normal vision, deuteranopia,
protanopia and tritanopia.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from engine.hashing import SHORT_HASH_CHARS
from engine.hashing import short_hash as _engine_short_hash

#: Block / token states: one fill each, used by every figure, the lab component and legends.
STATE_COLORS: dict[str, str] = {
    "null": "#3b3b3b",  # block 0, never used
    "free": "#f7f7f7",  # in the free queue, no hash: nothing to lose
    "cached_free": "#E69F00",  # in the free queue but still hashed: hittable until evicted
    "in_use": "#0072B2",  # held by at least one request
    "hit": "#009E73",  # served from the prefix cache
    "computed": "#8fcbef",  # computed by the model for this request, now cached
    "partial": "#CC79A7",  # not full yet: no hash yet (a new block, or the prompt's tail)
    "evicted": "#D55E00",  # hash dropped when the block was reused
}
#: The fills that must stay apart from each other (the colour-vision test checks these).
FILL_STATES = tuple(STATE_COLORS)

STATE_LABELS: dict[str, str] = {
    "null": "null block",
    "free": "free, empty",
    "cached_free": "free, still cached",
    "in_use": "in use",
    "hit": "cache hit",
    "computed": "computed",
    "partial": "not full yet (no hash)",
    "evicted": "evicted",
}

#: A glyph per state, drawn in the tile beside its colour: the state without colour.
STATE_GLYPHS: dict[str, str] = {
    "null": "⊘",
    "free": "○",
    "cached_free": "#",
    "in_use": "●",
    "hit": "✓",
    "computed": "◆",
    "partial": "◐",
    "evicted": "✗",
}

#: Fill patterns (Plotly's pattern shapes; the lab component draws the same as SVG/CSS).
STATE_PATTERNS: dict[str, str] = {"partial": "/", "cached_free": "."}


@dataclass(frozen=True)
class Outline:
    """One reason to mark a block: colour, width (px) and dash (Plotly's names; CSS uses the same)."""

    color: str
    width: int
    dash: str  # "solid" | "dash" | "dot" | "dashdot"
    label: str

    @property
    def css(self) -> str:
        style = {"solid": "solid", "dash": "dashed", "dot": "dotted", "dashdot": "double"}[self.dash]
        return f"{self.width}px {style} {self.color}"


OUTLINES: dict[str, Outline] = {
    "touched": Outline("#111111", 4, "solid", "touched by this step"),
    "selected": Outline("#7b3294", 4, "dash", "selected"),
    "differs": Outline("#111111", 4, "dot", "first difference"),
    "generated": Outline("#111111", 3, "dashdot", "first generated token"),
}
PLAIN_OUTLINE = "#90a4ae"  # a tile's ordinary thin border

#: Chart series (settings, not states): never a state's colour.
SERIES_COLORS: dict[str, str] = {"off": "#9e9e9e", "vllm": "#332288", "classic": "#882255"}

#: Minimum CIE76 distance between any two state fills, under every simulated vision.
MIN_DELTA_E = 15.0

#: One hash length everywhere (tiles, tables, event text, pickers): 8 hex digits.
HASH_CHARS = SHORT_HASH_CHARS
NO_HASH = "—"  # a tile without a hash: one narrow glyph, never a phrase that spills

FONT_SIZE = 15  # readable at a projector's resolution
PROJECTOR_FONT_SIZE = 18
FONT_FAMILY = "Inter, Segoe UI, Helvetica, Arial, sans-serif"
#: Fills dark enough for white text; every other fill takes ``DARK_TEXT``. Both give a WCAG contrast
#: of at least 4.5:1 on their fills (``tests/viz/test_contrast.py``): white on the hit-green was 3.4:1
#: and on the evicted-orange 3.9:1, near-black on them is 5.5:1 and 4.9:1.
DARK_FILLS = {"null", "in_use"}
DARK_TEXT = "#111111"
#: WCAG 2's minimum contrast for normal-size text (level AA).
MIN_TEXT_CONTRAST = 4.5


def short_hash(block_hash: bytes | int | None) -> str:
    """A hash as every view shows it: the first ``HASH_CHARS`` hex digits, or ``NO_HASH``."""
    return NO_HASH if block_hash is None else _engine_short_hash(block_hash, HASH_CHARS)


def text_color(state: str) -> str:
    """Label colour readable on a state's fill."""
    return "white" if state in DARK_FILLS else DARK_TEXT


def contrast_ratio(color_a: str, color_b: str) -> float:
    """WCAG 2 contrast ratio of two ``#rrggbb`` colours (or ``white``), from 1 to 21."""

    def luminance(color: str) -> float:
        hex_digits = "ffffff" if color == "white" else color.lstrip("#")
        channels = [int(hex_digits[i : i + 2], 16) / 255 for i in (0, 2, 4)]
        linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    light, dark = sorted((luminance(color_a), luminance(color_b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def state_tag(state: str) -> str:
    """``✓ cache hit``: glyph and words, for hover text and legends."""
    return f"{STATE_GLYPHS[state]} {STATE_LABELS[state]}"


def legend_items() -> list[tuple[str, str, str, str]]:
    """``(kind, key, glyph or dash, label)`` for every state and outline, in legend order."""
    items = [("state", s, STATE_GLYPHS[s], STATE_LABELS[s]) for s in FILL_STATES]
    items += [("outline", k, o.dash, o.label) for k, o in OUTLINES.items()]
    return items


def swatch_css(state: str) -> str:
    """CSS background for a state's fill, with its pattern drawn as a gradient."""
    color = STATE_COLORS[state]
    pattern = STATE_PATTERNS.get(state)
    if pattern == "/":
        return (f"background:repeating-linear-gradient(135deg,{color} 0 4px,"
                f"rgba(255,255,255,.55) 4px 6px),{color}")
    if pattern == ".":
        return f"background:radial-gradient(rgba(0,0,0,.28) 1px,transparent 1.5px) 0 0/5px 5px,{color}"
    return f"background:{color}"


def legend_html(states: tuple[str, ...] | list[str] = FILL_STATES, outlines: tuple[str, ...] = ()) -> str:
    """Inline chips generated from this module: pattern-filled square with its glyph, then the label."""
    chips = []
    for state in states:
        chips.append(
            "<span class='pl-chip' style='display:inline-flex;align-items:center;margin-right:12px;"
            "white-space:nowrap;font-size:.9rem'>"
            f"<span style='width:18px;height:18px;border-radius:3px;border:1px solid {PLAIN_OUTLINE};"
            f"{swatch_css(state)};color:{text_color(state)};display:inline-flex;align-items:center;"
            f"justify-content:center;font-size:12px;margin-right:5px'>{escape(STATE_GLYPHS[state])}</span>"
            f"{escape(STATE_LABELS[state])}</span>"
        )
    for key in outlines:
        outline = OUTLINES[key]
        chips.append(
            "<span class='pl-chip' style='display:inline-flex;align-items:center;margin-right:12px;"
            "white-space:nowrap;font-size:.9rem'>"
            f"<span style='width:14px;height:14px;border:{outline.css};display:inline-block;margin-right:6px'></span>"
            f"{escape(outline.label)}</span>"
        )
    return "<div style='line-height:1.9;display:inline'>" + "".join(chips) + "</div>"


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


def player_css() -> str:
    """The player's colours as one generated stylesheet: CSS variables and a rule per state.

    ``ui/lab_player/player.css`` has the layout and reads these; anything with ``data-state="..."``
    (a tile, a chip, a legend swatch, a guess button) is painted by its state's rule, fill and text colour
    together, so the browser's pictures and the Plotly figures can only use the same colours.
    """
    variables = {
        "--plain": PLAIN_OUTLINE,
        "--evicted": STATE_COLORS["evicted"],
        "--evicted-text": text_color("evicted"),
        "--touched": OUTLINES["touched"].css,
        "--selected": OUTLINES["selected"].css,
        "--differs": OUTLINES["differs"].css,
        "--selected-row": OUTLINES["selected"].color + "33",
    }
    lines = [":root { " + " ".join(f"{name}: {value};" for name, value in variables.items()) + " }"]
    lines += [f'[data-state="{state}"] {{ {swatch_css(state)}; color: {text_color(state)}; }}' for state in FILL_STATES]
    return "\n".join(lines) + "\n"
