"""The browser player: PrefixLab's one renderer of the pool, the free queue, the block tables and the hash table.

A small Streamlit component (plain HTML/CSS/JS modules in ``ui/lab_player/``). It receives an engine's
whole timeline once (a :class:`teaching.pages.playback.Playback`) and plays it client-side: step, scrub,
autoplay, the transitions between states and "predict the victim" cost the server nothing. It returns
``{"step", "block", "nonce"}`` only when playback rests, so the URL can follow.

Five pages draw with it: the lab (``mode="lab"``: every control), the Playground's engine view
(``"engine"``: the transport, no predict), the lessons (``"view"``: no controls; the lesson's own
Next button moves ``step``), and in ``"view"`` mode too the KV cache groups page (with ``groups``) and
the second-tier page (with ``host``), each moved by its own line slider. :class:`PlayerArgs` is the whole message, checked before it is sent; the
JavaScript side reads it as ``docs/player.md`` describes. Colours come from :func:`viz.theme.player_css`.
"""

from __future__ import annotations

import functools
import hashlib
import threading
import weakref
from pathlib import Path
from typing import Any, Literal

import msgspec
import streamlit.components.v1 as components

from teaching.pages.lab import LabRuns, alignment
from teaching.pages.playback import GroupsPanel, HostPanel, Playback, checked
from viz.free_queue import QUEUE_MARKS
from viz.theme import FILL_STATES, NO_HASH, OUTLINES, STATE_GLYPHS, STATE_LABELS, player_css

FRONTEND = Path(__file__).parent / "lab_player"
_component = components.declare_component("prefixlab_lab_player", path=str(FRONTEND))

Mode = Literal["lab", "engine", "view"]


class PlayerTheme(msgspec.Struct, frozen=True):
    """The visual language as the player needs it (one source: :mod:`viz.theme`)."""

    css: str  # the generated stylesheet: variables and one rule per state
    glyph: dict[str, str]
    label: dict[str, str]
    legend_states: list[str]
    outline_css: dict[str, str]
    outline_label: dict[str, str]
    no_hash: str
    marks: dict[str, str]  # the free queue's marks (viz.free_queue.QUEUE_MARKS)


class Other(msgspec.Struct, frozen=True):
    """The second policy's timeline in Compare, and which of its states matches each of ours."""

    data: Playback
    align: list[int]

    def __post_init__(self) -> None:
        if any(not 0 <= i < len(self.data.frames) for i in self.align):
            raise ValueError("an aligned index is outside the other timeline")


class PlayerArgs(msgspec.Struct, frozen=True):
    """Everything the player gets on each render. ``data_id`` names the timeline: a new one resets the player."""

    data: Playback
    data_id: str
    step: int
    mode: Mode = "lab"
    block: int | None = None
    other: Other | None = None
    projector: bool = False
    predict: bool = False
    labels: list[str] = msgspec.field(default_factory=lambda: ["", ""])
    notes: list[str] = msgspec.field(default_factory=lambda: ["", ""])
    touched: list[int] | None = None  # outline these instead of the current event's blocks (a lesson's line)
    ack: str | int | None = None  # the nonce of the last value the page applied (opaque: echoed back as sent)
    groups: GroupsPanel | None = None  # a hybrid model's per-group block tables at ``step`` (the groups page)
    host: HostPanel | None = None  # the host tier under the pool at ``step`` (the second-tier page)

    def __post_init__(self) -> None:
        if not 0 <= self.step < len(self.data.frames):
            raise ValueError(f"step {self.step} is outside the timeline (0..{len(self.data.frames) - 1})")
        if self.other is not None and len(self.other.align) != len(self.data.frames):
            raise ValueError("Compare needs one aligned index per state")


def theme() -> PlayerTheme:
    return PlayerTheme(
        css=player_css(),
        glyph=STATE_GLYPHS,
        label=STATE_LABELS,
        legend_states=[s for s in FILL_STATES if s != "evicted"] + ["evicted"],
        outline_css={k: o.css for k, o in OUTLINES.items() if k in ("touched", "selected", "differs")},
        outline_label={k: o.label for k, o in OUTLINES.items()},
        no_hash=NO_HASH,
        marks=QUEUE_MARKS,
    )


_encoded_lock = threading.Lock()
_encoded_timelines: dict[int, tuple[weakref.ref[Playback], bytes]] = {}  # id -> (the timeline, its checked JSON)
KEPT_TIMELINES = 64  # a few per session are alive at once; older entries go first


def timeline_json(data: Playback) -> bytes:
    """``data`` as the JSON the player parses, checked by decoding it back against :class:`Playback`; once
    per timeline (a built timeline is frozen).

    The timeline travels as bytes, a component argument Streamlit passes through as it is: as a dict it
    was converted, checked and JSON-encoded again on every rerun (a Playground session's thousand
    states: ~35 ms of the server's Python per run, holding the GIL the whole time); msgspec encodes and
    checks it in a few.
    """
    with _encoded_lock:
        kept = _encoded_timelines.get(id(data))
        if kept is None or kept[0]() is not data:  # a weak reference: a dropped timeline is not kept alive
            encoded = msgspec.json.encode(data)
            msgspec.json.decode(encoded, type=Playback)  # every field's type and Playback's own rules
            while len(_encoded_timelines) >= KEPT_TIMELINES:
                _encoded_timelines.pop(next(iter(_encoded_timelines)))
            kept = _encoded_timelines[id(data)] = (weakref.ref(data), encoded)
        return kept[1]


def player_message(args: PlayerArgs) -> dict[str, Any]:
    """What the player receives: ``checked(args)`` and the theme, except that the timelines go as their JSON
    bytes (:func:`timeline_json`; ``other.data`` as ``other_data``); the small fields were checked when
    ``args`` was built (:meth:`PlayerArgs.__post_init__`) and go as they are."""
    message = {name: msgspec.to_builtins(getattr(args, name)) for name in args.__struct_fields__
               if name not in ("data", "other")}
    message["data"] = timeline_json(args.data)
    message["other"] = None if args.other is None else {"align": list(args.other.align)}
    message["other_data"] = None if args.other is None else timeline_json(args.other.data)
    message["theme"] = theme_message()
    return message


@functools.cache
def theme_message() -> dict[str, Any]:
    """``checked(theme())``, built once: the visual language is constant while the server runs."""
    return checked(theme())


def player(args: PlayerArgs, *, key: str) -> dict[str, Any] | None:
    """Draw the player with ``args``; the value it last sent, or None."""
    return _component(**player_message(args), key=key, default=None)


def timeline_id(*parts: object) -> str:
    """A short stable name for a timeline, from what it was built from."""
    return hashlib.sha1("|".join(map(str, parts)).encode()).hexdigest()[:16]


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
    ack: str | int | None = None,
    key: str = "lab_player",
) -> dict[str, Any] | None:
    """The lab: ``runs.runs[policy]`` at ``step``, every control on; the value it last sent (or None).

    ``predict``: stop before each allocation that evicts and ask which block goes first.
    ``ack``: the nonce of the last value the page applied, so the player can tell a rerun that
    answers its newest step from an older one still in flight (and not jump back).
    """
    other = None
    if compare_with is not None:
        other = Other(runs.playback(compare_with), alignment(runs.runs[policy], runs.runs[compare_with]))
    args = PlayerArgs(
        data=runs.playback(policy), data_id=timeline_id(runs.text, settings_key, policy, compare_with), step=step,
        block=block, other=other, projector=projector, predict=predict, labels=list(labels), notes=list(notes), ack=ack,
    )
    return player(args, key=key)
