"""The lab's browser player: a small Streamlit component (plain HTML/CSS/JS in ``ui/lab_player/``).

It receives a scenario's whole timeline once (:meth:`teaching.pages.lab.LabRuns.playback`) and plays
it client-side: step, scrub, autoplay, the transitions between states and "predict the victim"
(its questions and answers are in the timeline data) cost the server nothing. It returns
``{"step", "block", "nonce"}`` only when playback rests, so the URL can follow. Colours,
glyphs and outlines come from :mod:`viz.theme`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import streamlit.components.v1 as components

from teaching.pages.lab import LabRuns, alignment
from viz.free_queue import QUEUE_MARKS
from viz.theme import (
    FILL_STATES,
    NO_HASH,
    OUTLINES,
    PLAIN_OUTLINE,
    STATE_COLORS,
    STATE_GLYPHS,
    STATE_LABELS,
    swatch_css,
    text_color,
)

FRONTEND = Path(__file__).parent / "lab_player"
_component = components.declare_component("prefixlab_lab_player", path=str(FRONTEND))


def theme_args() -> dict[str, Any]:
    """The visual language as the player needs it (one source: viz.theme)."""
    return {
        "fill": STATE_COLORS,
        "fill_css": {s: swatch_css(s).removeprefix("background:") for s in FILL_STATES},
        "text": {s: text_color(s) for s in FILL_STATES},
        "glyph": STATE_GLYPHS,
        "label": STATE_LABELS,
        "legend_states": [s for s in FILL_STATES if s != "evicted"] + ["evicted"],
        "outline_css": {k: o.css for k, o in OUTLINES.items() if k in ("touched", "selected", "differs")},
        "outline_label": {k: o.label for k, o in OUTLINES.items()},
        "selected_row": OUTLINES["selected"].color + "33",
        "plain": PLAIN_OUTLINE,
        "no_hash": NO_HASH,
        "marks": QUEUE_MARKS,
    }


def lab_player(
    runs: LabRuns,
    policy: str,
    *,
    step: int,
    block: int | None,
    settings_key: str,
    compare_with: str | None = None,
    labels: tuple[str, str] = ("", ""),
    notes: tuple[str, str] = ("", ""),
    projector: bool = False,
    predict: bool = False,
    ack: object = None,
    key: str = "lab_player",
) -> dict[str, Any] | None:
    """Draw the player for ``runs.runs[policy]`` at ``step``; the value it last sent (or None).

    ``predict``: stop before each allocation that evicts and ask which block goes first.
    ``ack``: the nonce of the last value the page applied, so the player can tell a rerun that
    answers its newest step from an older one still in flight (and not jump back).
    """
    data = runs.playback(policy)
    other = None
    if compare_with is not None:
        other = {"data": runs.playback(compare_with), "align": alignment(runs.runs[policy], runs.runs[compare_with])}
    data_id = hashlib.sha1(f"{runs.text}|{settings_key}|{policy}|{compare_with}".encode()).hexdigest()[:16]
    return _component(
        data=data, other=other, data_id=data_id, step=step, block=block, projector=projector, predict=predict,
        labels=list(labels), notes=list(notes), theme=theme_args(), ack=ack, key=key, default=None,
    )
