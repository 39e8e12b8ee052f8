"""Text on coloured tiles is readable on a projector: WCAG 2 contrast of at least 4.5:1 (issue 21).

White on the hit-green tile was 3.4:1 and on the evicted-orange 3.9:1; every state's text colour is
now checked against its fill, and so are the places that draw text on a fill of their own.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from viz.theme import MIN_TEXT_CONTRAST, STATE_COLORS, contrast_ratio, text_color

ROOT = Path(__file__).resolve().parents[2]


def test_the_ratio_is_wcags() -> None:
    assert contrast_ratio("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast_ratio("white", "white") == pytest.approx(1.0)
    assert contrast_ratio("#009E73", "white") == pytest.approx(3.42, abs=0.01)  # the measurement
    assert contrast_ratio("#D55E00", "white") == pytest.approx(3.87, abs=0.01)


@pytest.mark.parametrize("state", list(STATE_COLORS))
def test_every_tile_state_has_readable_text(state: str) -> None:
    ratio = contrast_ratio(STATE_COLORS[state], text_color(state))
    assert ratio >= MIN_TEXT_CONTRAST, f"{state}: {text_color(state)} on {STATE_COLORS[state]} is {ratio:.2f}:1"


def test_the_prefix_tree_writes_with_the_theme_text_colours() -> None:
    from viz.live import TREE_STATES

    for name, state in TREE_STATES.items():
        assert contrast_ratio(STATE_COLORS[state], text_color(state)) >= MIN_TEXT_CONTRAST, name
    source = (ROOT / "viz" / "live.py").read_text(encoding="utf-8")
    assert 'textfont=dict(color="white"' not in source


def test_the_players_eviction_flash_uses_the_theme_text_colour() -> None:
    css = (ROOT / "ui" / "lab_player" / "player.css").read_text(encoding="utf-8")
    flash = [line for line in css.splitlines() if "flash" in line]
    assert flash and not [line for line in flash if "color: white" in line]
    from viz.theme import player_css

    assert "--evicted-text" in css and f"--evicted-text: {text_color('evicted')};" in player_css()
