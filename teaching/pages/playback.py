"""The player's data: every state of an engine's event log, as typed structures, checked before it is sent.

The browser player (``ui/lab_player/``) is the one renderer of the pool, the free queue, the block
tables and the hash table, wherever they appear: the lab (a scenario), the lessons (a scenario, stepped
line by line), the Playground (the session's real engine), and the KV cache groups and second-tier pages
(a scenario, with a :class:`GroupsPanel` or a :class:`HostPanel` for the line shown). All hand it a
:class:`Playback`.
The shapes here are the contract with the JavaScript side, documented in ``docs/player.md``: rows
marked ``array_like`` travel as JSON arrays (``[request_id, status, block_ids, states]``), the rest as
objects with these field names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import msgspec

from engine.events import BlockRemoved, BlocksAllocated, Event, StepStarted
from engine.hashing import short_hash
from engine.llm_engine import LLMEngine
from engine.timeline import CacheSnapshot, Timeline, hit_blocks, note_hits
from teaching import limits
from teaching.scenarios.describe import EVENT_TAGS, TokenText, describe_event, tokens_label, without_markup
from teaching.scenarios.scenario import ActionSpan, EngineLog

#: Jump buttons: label -> event kinds to stop after.
JUMPS: dict[str, set[str]] = {
    "eviction": {"evicted"},
    "hit": {"touch"},
    "preemption": {"preempt"},
}

#: Where the player writes the block the student picked into the "wrong" text (one text per question,
#: not one per block: a pool may have thousands of free blocks).
GUESS = "{guess}"


# -- the schema -------------------------------------------------------------------------------------------
# A timeline holds thousands of these and none of them refers back to another: ``gc=False`` and tuples
# (which the collector stops tracking once it finds only numbers and strings in them) keep a timeline out of
# the cyclic garbage collector's full walks, which a room's server otherwise repeats over every session's
# states (measured: 0.88M tracked objects and full collections of up to 0.75 s in a 60 s load test).
class Card(msgspec.Struct, frozen=True, gc=False):
    """The current event in words: where it is, a short tag, what happened, and the line's note."""

    head: str
    tag: str
    body: str
    note: str = ""


class TableRow(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """One request's block table: physical ids in logical order, each ``hit``, ``in_use`` or ``partial``."""

    request_id: str
    status: str
    block_ids: tuple[int, ...]
    states: tuple[str, ...]


class HashRow(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """One hash-table entry: short hash, the blocks holding it (lookups use the first), their tokens."""

    hash: str
    block_ids: tuple[int, ...]
    tokens: str


class Frame(msgspec.Struct, frozen=True, gc=False):
    """The whole cache after some number of events (``ref``/``hash`` indexed by block id)."""

    ref: tuple[int, ...]
    hash: tuple[str | None, ...]
    fq: tuple[int, ...]  # the free queue, head first
    tables: tuple[TableRow, ...]
    hashes: tuple[HashRow, ...]
    evictions: int
    kind: str  # the event's kind, "start" before the first
    touched: tuple[int, ...]  # blocks the event acts on (outlined)
    evicted: tuple[int, ...]  # blocks it evicted (flashed)
    card: Card


class Question(msgspec.Struct, frozen=True):
    """"Which block goes next?", asked at ``ask_at``, revealed by stepping to ``reveal_at``; answers included."""

    ask_at: int
    reveal_at: int
    request_id: str
    queue: list[int]
    answer: int
    evicted: list[int]
    text: str
    right: str
    wrong: str  # with GUESS where the picked block goes


class Playback(msgspec.Struct, frozen=True, weakref=True):
    """Every state of one engine's log (``frames[i]``: after ``i`` events), the jump targets, the questions.

    ``weakref``: the player's cache of encoded timelines (``ui.lab_player.timeline_json``) keeps the bytes
    without keeping a timeline's objects alive for the garbage collector to walk again and again."""

    policy: str
    num_blocks: int
    block_size: int
    frames: list[Frame]
    jumps: dict[str, list[int]]
    questions: list[Question]
    offset: int = 0  # frames[0] is the state after this many events (the rest of a long log is left out)

    def __post_init__(self) -> None:
        """What the player relies on beyond the types (checked on construction and on :func:`checked`)."""
        last = len(self.frames) - 1
        if last < 0:
            raise ValueError("a playback has at least the state before any event")
        if any(len(f.ref) != self.num_blocks or len(f.hash) != self.num_blocks for f in self.frames):
            raise ValueError("every frame has one ref count and one hash per block")
        if any(not 0 < i <= last for targets in self.jumps.values() for i in targets):
            raise ValueError("a jump target is outside the frames")
        if self.offset < 0:
            raise ValueError("the first frame's event count is negative")
        if any(not 0 <= q.ask_at < q.reveal_at <= last for q in self.questions):
            raise ValueError("a question is asked or revealed outside the frames")


class GroupTable(msgspec.Struct, frozen=True):
    """One KV cache group's block tables: ``rows`` are ``[request_id, block_ids]``, ``None`` (null) where the
    group's window released a block and the null block stands; ``released``: what the window gave back so far."""

    group_idx: int
    title: str
    sliding: bool
    rows: list[tuple[str, list[int | None]]]
    released: list[int]


class GroupHit(msgspec.Struct, array_like=True, frozen=True):
    """If this prompt came again now: the tokens each group alone would serve, and what all groups agree on."""

    request_id: str
    num_prompt_tokens: int
    per_group: list[int]
    agreed: int


class GroupsPanel(msgspec.Struct, frozen=True):
    """A hybrid model's KV cache groups at the shown step (the "KV cache groups" page)."""

    tables: list[GroupTable]
    hits: list[GroupHit]
    num_free_blocks: int


class HostBlock(msgspec.Struct, array_like=True, frozen=True):
    """One block of the host tier: its tokens as words, and whether it just spilled there."""

    words: str
    stored: bool


class HostPanel(msgspec.Struct, frozen=True):
    """The host tier (CPU) under the device pool at the shown step, oldest store first, and what moved."""

    blocks: list[HostBlock]
    notes: list[str]


def checked(value: msgspec.Struct) -> dict[str, Any]:
    """``value`` as the JSON-ready dict the player receives, after decoding it back against its own type.

    The round trip checks every field's type and :meth:`Playback.__post_init__`'s rules, so a broken
    shape fails here, in Python, instead of as a blank picture in the browser.
    """
    data = msgspec.to_builtins(value)
    msgspec.convert(data, type(value))
    assert isinstance(data, dict)
    return data


# -- what can be played ----------------------------------------------------------------------------------
class Tape(Protocol):
    """An engine's event log as the player reads it: a :class:`ScenarioRun` or an :class:`EngineTape`."""

    @property
    def events(self) -> list[Event]: ...
    @property
    def num_blocks(self) -> int: ...
    @property
    def block_size(self) -> int: ...
    @property
    def free_policy(self) -> str: ...
    def timeline(self) -> Timeline: ...
    def span_at(self, index: int) -> ActionSpan | None: ...
    def token_text(self, token_id: int) -> str: ...


@dataclass
class EngineTape(EngineLog):
    """Any :class:`LLMEngine`'s log (e.g. the Playground's real one): no scenario lines, its own token text."""

    engine: LLMEngine
    text: TokenText

    def span_at(self, index: int) -> ActionSpan | None:
        return None

    def token_text(self, token_id: int) -> str:
        return self.text(token_id)


# -- building it -----------------------------------------------------------------------------------------
def engine_step_at(events: list[Event], index: int) -> int:
    """The engine step the state after ``index`` events belongs to (0 before the first step)."""
    for event in reversed(events[:index]):
        if isinstance(event, StepStarted):
            return event.step
    return 0


def event_card(tape: Tape, contents: dict[bytes, list[int]], pos: int) -> Card:
    """The card for the state after ``pos`` events (``pos == 0``: before anything happened)."""
    span = tape.span_at(pos)
    head = f"Event {pos} of {len(tape.events)} · engine step {engine_step_at(tape.events, pos)}"
    if span is not None:
        head += f" · after line {span.action.line_no}: {without_markup(span.action.source)}"
    elif tape.span_at(1) is not None:  # a scenario, before its first line (an engine's log has no lines)
        head += " · before the first line"
    note = span.note if span and span.note and span.end == pos else ""
    if pos == 0:
        return Card(head, "START", "Nothing has happened yet: every usable block is free. "
                    "Press ▶ (or the → key) to apply the first event.", note)
    event = tape.events[pos - 1]
    tag = EVENT_TAGS.get(event.kind, event.kind.upper())
    return Card(head, tag, describe_event(event, tape.token_text, contents), note)


def touched_blocks(event: Event | None) -> list[int]:
    """The block ids an event acts on (outlined by the player as "touched by this step")."""
    return list(getattr(event, "block_ids", None) or []) if event is not None else []


def table_states(snap: CacheSnapshot, request_id: str, hits: dict[str, set[int]]) -> list[str]:
    """Per block of a request's table: ``hit`` (from the cache), ``in_use`` (hashed: the pool grid's own
    colour for it) or ``partial``."""
    return [
        "hit" if block_id in hits.get(request_id, set())
        else "in_use" if snap.block_hash[block_id] is not None else "partial"
        for block_id in snap.block_tables[request_id]
    ]


def frame(tape: Tape, contents: dict[bytes, list[int]], snap: CacheSnapshot, pos: int,
          labels: dict[bytes, str] | None = None, hits: dict[str, set[int]] | None = None) -> Frame:
    """One state: pool, free queue, block tables, hash table, and the event card.

    ``labels``: each hash's token label, filled as they are met. A block's tokens never change, so
    one playback decodes each hash's tokens once instead of once per state (a tokenizer's decode
    is the costly part of a long Playground log). ``hits``: :func:`hit_blocks` at ``pos``, when the
    caller walks the log anyway (else it is read from the log's start).
    """
    labels = {} if labels is None else labels
    for h in snap.hash_table:
        if h not in labels:
            labels[h] = tokens_label(contents.get(h), tape.token_text)
    event = tape.events[pos - 1] if pos else None
    hits = hit_blocks(tape.events, pos) if hits is None else hits
    return Frame(
        ref=tuple(snap.ref_cnt),
        hash=tuple(short_hash(h) if h is not None else None for h in snap.block_hash),
        fq=tuple(snap.free_queue),
        tables=tuple(TableRow(rid, snap.request_status.get(rid, ""), tuple(ids), tuple(table_states(snap, rid, hits)))
                     for rid, ids in snap.block_tables.items() if ids),
        hashes=tuple(HashRow(short_hash(h), tuple(ids), labels[h])
                     for h, ids in snap.hash_table.items() if ids),
        evictions=snap.num_evictions,
        kind=event.kind if event is not None else "start",
        touched=tuple(touched_blocks(event)),
        evicted=tuple(touched_blocks(event)) if event is not None and event.kind == "evicted" else (),
        card=event_card(tape, contents, pos),
    )


@dataclass(frozen=True)
class EvictionQuestion:
    """"Which block goes next?" asked just before an allocation that evicts.

    ``ask_at``: the state to show (before the allocation); ``reveal_at``: after the
    allocation and its evictions; ``answer``: the first block evicted; ``evicted``: every block it evicts.
    """

    ask_at: int
    reveal_at: int
    request_id: str
    num_new_blocks: int
    answer: int
    evicted: list[int]
    allocated: list[int]


def next_eviction_question(tape: Tape, index: int) -> EvictionQuestion | None:
    """The next allocation at or after ``index`` that evicts a cached block, or None.

    The engine logs the allocation first (the blocks leave the free queue for the request's
    table), then one eviction per popped block that still had a hash: the order vLLM does it.
    """
    events = tape.events
    alloc_at = next(
        (i for i in range(index, len(events) - 1)
         if isinstance(events[i], BlocksAllocated) and isinstance(events[i + 1], BlockRemoved)),
        None,
    )
    if alloc_at is None:
        return None
    alloc = events[alloc_at]
    assert isinstance(alloc, BlocksAllocated)
    evicted: list[int] = []
    i = alloc_at + 1
    while i < len(events) and isinstance(events[i], BlockRemoved):
        evicted += events[i].block_ids  # type: ignore[attr-defined]
        i += 1
    return EvictionQuestion(
        ask_at=alloc_at, reveal_at=i, request_id=alloc.request_id,
        num_new_blocks=len(alloc.block_ids), answer=evicted[0], evicted=evicted, allocated=list(alloc.block_ids),
    )


def question_text(question: EvictionQuestion) -> str:
    """The question as the student reads it (plain text: the player shows it under "Predict the victim")."""
    blocks = f"{question.num_new_blocks} new block{'s' if question.num_new_blocks != 1 else ''}"
    return (f"{question.request_id} is about to take {blocks} from the head of "
            "the free queue. Which block will be the first to lose its cached contents?")


def verdict(question: EvictionQuestion, guess: int | str | None) -> tuple[bool, str]:
    """(right?, the explanation) for a guess, naming the rule: hashless blocks go silently, the first hashed one is evicted.

    ``guess`` may be :data:`GUESS`: the wrong-guess text with a place for the block picked later.
    """
    taken = ", ".join(str(b) for b in question.allocated)
    later = [str(b) for b in question.evicted[1:]]
    why = (f"The allocation popped {taken} from the head. Blocks without a hash are reused silently; "
           f"the first one still holding a hash is evicted: block {question.answer}"
           + (f" (then {', '.join(later)})." if later else "."))
    if guess == question.answer:
        return True, f"Right! Block {question.answer} is evicted. {why}"
    return False, f"Not quite: you picked {guess}, but block {question.answer} is evicted. {why}"


def predict_questions(tape: Tape, free_queues: list[list[int]]) -> list[Question]:
    """Every "which block goes next?" question of ``tape``, for the browser player, answers included.

    ``free_queues[i]`` is the free queue after ``i`` events. The player stops at each ``ask_at``,
    offers the blocks of ``queue``, and shows ``right`` or ``wrong`` with :data:`GUESS` replaced
    by the block picked (both from :func:`verdict`, naming the rule) without asking the server.
    Questions follow one another: the next is looked for after the previous one's allocation and evictions.
    """
    questions: list[Question] = []
    question = next_eviction_question(tape, 0)
    while question is not None:
        questions.append(Question(
            ask_at=question.ask_at, reveal_at=question.reveal_at, request_id=question.request_id,
            queue=list(free_queues[question.ask_at]), answer=question.answer, evicted=question.evicted,
            text=question_text(question), right=verdict(question, question.answer)[1], wrong=verdict(question, GUESS)[1],
        ))
        question = next_eviction_question(tape, question.reveal_at)
    return questions


def playback(tape: Tape, contents: dict[bytes, list[int]], *, last: int | None = None) -> Playback:
    """Every state of ``tape`` (``frames[i]`` = after ``offset + i`` events), the jump targets and the predict questions.

    The browser player gets this once per log and steps, scrubs, animates and asks
    "predict the victim" with no server round trip. ``last``: keep only the newest ``last`` events'
    states (a long Playground session), so what is sent stays small; positions then count from ``offset``.
    """
    timeline = tape.timeline()
    total = len(tape.events)
    offset = max(0, total - last) if last is not None else 0
    frames, free_queues = [], []
    labels: dict[bytes, str] = {}
    hits = hit_blocks(tape.events, offset)  # then moved on event by event: one walk of the log, not one per state
    for pos in range(offset, total + 1):
        if pos > offset:
            note_hits(hits, tape.events[pos - 1])
        snap = timeline.state_at(pos)
        frames.append(frame(tape, contents, snap, pos, labels, hits))  # use the cursor before moving it
        free_queues.append(list(snap.free_queue))
    jumps = {name: [i + 1 - offset for i, e in enumerate(tape.events) if e.kind in kinds and i + 1 > offset]
             for name, kinds in JUMPS.items()}
    questions = [] if offset else predict_questions(tape, free_queues)  # a question needs its whole run
    return Playback(policy=tape.free_policy, num_blocks=tape.num_blocks, block_size=tape.block_size,
                    frames=frames, jumps=jumps, questions=questions, offset=offset)


def line_steps(spans: list[ActionSpan]) -> dict[int, int]:
    """Each scenario line's position in the timeline: the state after its last event (line 0: the start)."""
    return {0: 0, **{span.action.line_no: span.end for span in spans}}


def engine_playback(engine: LLMEngine, text: TokenText, contents: dict[bytes, list[int]],
                    last: int | None = limits.PLAYER_MAX_FRAMES) -> Playback:
    """:func:`playback` of any engine's log so far (the Playground's session engine), its newest ``last`` events."""
    return playback(EngineTape(engine, text), contents, last=last)

