"""The visual language in viz.theme: colour-blind safe, readable without colour, one hash length."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from viz.colorvision import DEFICIENCIES, delta_e, hex_to_rgb, min_distance, simulate
from viz.theme import (
    FILL_STATES,
    HASH_CHARS,
    MIN_DELTA_E,
    OUTLINES,
    SERIES_COLORS,
    STATE_COLORS,
    STATE_GLYPHS,
    STATE_LABELS,
    STATE_PATTERNS,
    legend_html,
    short_hash,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("vision", [None, *DEFICIENCIES])
def test_state_fills_stay_apart_under_every_colour_vision(vision: str | None) -> None:
    fills = {s: STATE_COLORS[s] for s in FILL_STATES}
    distance, a, b = min_distance(fills, vision)
    assert distance >= MIN_DELTA_E, f"{a} and {b} are only ΔE {distance:.1f} apart for {vision or 'normal vision'}"


def test_the_simulation_is_real() -> None:
    """Red and green collapse for a deuteranope, as the Machado model predicts; blue and yellow do not."""
    red, green = "#d62728", "#2ca02c"
    assert delta_e(hex_to_rgb(red), hex_to_rgb(green)) > 60
    assert delta_e(simulate(red, "deuteranopia"), simulate(green, "deuteranopia")) < 25
    assert delta_e(simulate("#1f77b4", "deuteranopia"), simulate("#ffdd00", "deuteranopia")) > 60
    assert min_distance({"a": red, "b": green}, "deuteranopia")[0] < MIN_DELTA_E + 10


def test_every_state_reads_without_colour() -> None:
    """Glyph (and pattern where one is set) differ for every pair of states."""
    assert set(STATE_GLYPHS) == set(STATE_COLORS) == set(STATE_LABELS)
    marks = [(STATE_GLYPHS[s], STATE_PATTERNS.get(s, "")) for s in FILL_STATES]
    assert len(set(marks)) == len(marks)
    assert len(set(STATE_GLYPHS.values())) == len(STATE_GLYPHS)  # glyph alone suffices


def test_outlines_differ_without_colour_and_series_never_reuse_a_state_colour() -> None:
    styles = [(o.dash, o.width) for o in OUTLINES.values()]
    assert len(set(styles)) == len(styles)
    assert not set(SERIES_COLORS.values()) & set(STATE_COLORS.values())
    assert not {o.color for o in OUTLINES.values()} & set(STATE_COLORS.values())


def test_one_hash_length() -> None:
    digest = bytes(range(32))
    assert short_hash(digest) == digest.hex()[:HASH_CHARS]
    assert short_hash(None) == "—"


def test_no_view_cuts_a_hash_itself() -> None:
    """Every hash label goes through short_hash at its one length: no ``.hex()[:n]``, no ``short(h, n)``."""
    offenders = []
    for folder in ("viz", "teaching", "app_pages", "ui"):
        for path in (ROOT / folder).rglob("*.py"):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                cut = re.search(r"\.hex\(\)\s*\[\s*:", line) or re.search(r"\bh\[:\d+\]", line)
                if cut or re.search(r"\bshort(_hash)?\([^()]*(\([^()]*\))?[^()]*,\s*\d+\s*\)", line):
                    offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_legend_is_generated_from_the_theme() -> None:
    html = legend_html(FILL_STATES, tuple(OUTLINES))
    for state in FILL_STATES:
        assert STATE_LABELS[state] in html and STATE_GLYPHS[state] in html
    for outline in OUTLINES.values():
        assert outline.label in html
    assert "partial (never cached)" not in html
