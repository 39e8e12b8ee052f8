"""The lab's logic without Streamlit: both policies' runs, aligning them, jumps, predict questions.

Everything here is a plain function over :class:`~teaching.scenarios.scenario.ScenarioRun`, so the page
stays thin and these rules are unit-testable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from engine.events import BlockRemoved, BlocksAllocated, Event, StepStarted
from engine.hashing import short_hash
from engine.kv_cache import FREE_POLICIES
from engine.timeline import CacheSnapshot, block_contents, hit_blocks
from engine.vllm_versions import resolve_vllm_version
from teaching import limits
from teaching.scenarios.describe import EVENT_TAGS, describe_event, tokens_label, without_markup
from teaching.scenarios.scenario import ScenarioRun, parse_scenario, run_scenario

#: Jump buttons: label -> event kinds to stop after.
JUMPS: dict[str, set[str]] = {
    "eviction": {"evicted"},
    "hit": {"touch"},
    "preemption": {"preempt"},
}


@dataclass
class LabRuns:
    """One scenario played under every free policy, plus the hash -> tokens map of each."""

    text: str
    runs: dict[str, ScenarioRun]
    contents: dict[str, dict[bytes, list[int]]] = field(default_factory=dict)
    _playbacks: dict[str, dict[str, object]] = field(default_factory=dict, repr=False)

    def playback(self, policy: str) -> dict[str, object]:
        """:func:`playback` of one policy's run, computed once."""
        if policy not in self._playbacks:
            self._playbacks[policy] = playback(self.runs[policy], self.contents[policy])
        return self._playbacks[policy]

    @property
    def title(self) -> str:
        return next(iter(self.runs.values())).scenario.title


def build_runs(
    text: str,
    *,
    block_size: int | None = None,
    num_blocks: int | None = None,
    hash_algo: str = "sha256",
) -> LabRuns:
    """Parse once, play under each policy. Raises :class:`~teaching.scenarios.scenario.ScenarioError`."""
    scenario = parse_scenario(text)
    runs = {
        # One time budget for both runs together: the lab plays each scenario twice, once per free rule,
        # each as the release that has it (resolve_vllm_version: "vllm" is 0.33, "classic" 0.23).
        policy: run_scenario(scenario, resolve_vllm_version(policy), block_size=block_size, num_blocks=num_blocks, hash_algo=hash_algo,
                             time_budget_s=limits.SCENARIO_TIME_BUDGET_S / len(FREE_POLICIES))
        for policy in FREE_POLICIES
    }
    return LabRuns(text, runs, {p: block_contents(r.events) for p, r in runs.items()})


def clamp(index: int, run: ScenarioRun) -> int:
    return max(0, min(int(index), len(run.events)))


def engine_step_at(events: list[Event], index: int) -> int:
    """The engine step the state after ``index`` events belongs to (0 before the first step)."""
    for event in reversed(events[:index]):
        if isinstance(event, StepStarted):
            return event.step
    return 0


def align_index(primary: ScenarioRun, secondary: ScenarioRun, index: int) -> int:
    """The index in ``secondary`` that matches ``index`` in ``primary`` ("same step").

    Both runs play the same scenario lines, so first match the line (action span); inside
    it, match the count of events that are not evictions, since evictions are exactly
    where the two free policies differ.
    """
    if index <= 0:
        return 0
    if index >= len(primary.events):
        return len(secondary.events)
    pos = next((k for k, s in enumerate(primary.spans) if s.start < index <= s.end), None)
    if pos is None or pos >= len(secondary.spans):
        return min(index, len(secondary.events))
    span, other = primary.spans[pos], secondary.spans[pos]
    wanted = sum(1 for e in primary.events[span.start : index] if e.kind != "evicted")
    j, seen = other.start, 0
    while j < other.end and seen < wanted:
        if secondary.events[j].kind != "evicted":
            seen += 1
        j += 1
    if primary.events[index - 1].kind == "evicted":  # include the other side's evictions of the same allocation
        while j < other.end and secondary.events[j].kind == "evicted":
            j += 1
    return j


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


def next_eviction_question(run: ScenarioRun, index: int) -> EvictionQuestion | None:
    """The next allocation at or after ``index`` that evicts a cached block, or None.

    The engine logs the allocation first (the blocks leave the free queue for the request's
    table), then one eviction per popped block that still had a hash: the order vLLM does it.
    """
    events = run.events
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


#: Where the player writes the block the student picked into the "wrong" text (one text per question,
#: not one per block: a pool may have thousands of free blocks).
GUESS = "{guess}"


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


def predict_questions(run: ScenarioRun, free_queues: list[list[int]]) -> list[dict[str, object]]:
    """Every "which block goes next?" question of ``run``, for the browser player, answers included.

    ``free_queues[i]`` is the free queue after ``i`` events. The player stops at each ``ask_at``,
    offers the blocks of ``queue``, and shows ``right`` or ``wrong`` with :data:`GUESS` replaced
    by the block picked (both from :func:`verdict`, naming the rule) without asking the server. Questions follow one another:
    the next is looked for after the previous one's allocation and evictions.
    """
    questions: list[dict[str, object]] = []
    question = next_eviction_question(run, 0)
    while question is not None:
        queue = list(free_queues[question.ask_at])
        questions.append({
            "ask_at": question.ask_at, "reveal_at": question.reveal_at, "request_id": question.request_id,
            "queue": queue, "answer": question.answer, "evicted": question.evicted, "text": question_text(question),
            "right": verdict(question, question.answer)[1],
            "wrong": verdict(question, GUESS)[1],
        })
        question = next_eviction_question(run, question.reveal_at)
    return questions


@dataclass(frozen=True)
class LogLine:
    index: int  # 1-based: the state after this event
    kind: str
    text: str
    current: bool
    future: bool


def log_window(
    run: ScenarioRun, index: int, describe: Callable[[Event], str], before: int = 6, after: int = 2
) -> list[LogLine]:
    """The events around ``index`` (the last applied one is current), for an event-log list."""
    lo, hi = max(0, index - before), min(len(run.events), index + after)
    return [
        LogLine(i + 1, run.events[i].kind, describe(run.events[i]), i + 1 == index, i + 1 > index)
        for i in range(lo, hi)
    ]


# -- the browser player's data: every state of a run, computed once and sent once ----------------------
@dataclass(frozen=True)
class EventCard:
    """The current event in words: where it is, a short tag, what happened, and the line's note."""

    head: str
    tag: str
    body: str
    note: str = ""


def event_card(run: ScenarioRun, contents: dict[bytes, list[int]], pos: int) -> EventCard:
    """The card for the state after ``pos`` events (``pos == 0``: before anything happened)."""
    span = run.span_at(pos)
    where = f"after line {span.action.line_no}: {without_markup(span.action.source)}" if span else "before the first line"
    head = f"Event {pos} of {len(run.events)} · engine step {engine_step_at(run.events, pos)} · {where}"
    note = span.note if span and span.note and span.end == pos else ""
    if pos == 0:
        return EventCard(head, "START", "Nothing has happened yet: every usable block is free. "
                         "Press ▶ (or the → key) to apply the first event.", note)
    event = run.events[pos - 1]
    tag = EVENT_TAGS.get(event.kind, event.kind.upper())
    return EventCard(head, tag, describe_event(event, run.token_text, contents), note)


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


def frame(run: ScenarioRun, contents: dict[bytes, list[int]], snap: CacheSnapshot, pos: int) -> dict[str, object]:
    """One state as plain JSON data: pool, free queue, block tables, hash table, and the event card."""
    event = run.events[pos - 1] if pos else None
    hits = hit_blocks(run.events, pos)
    card = event_card(run, contents, pos)
    return {
        "ref": list(snap.ref_cnt),
        "hash": [short_hash(h) if h is not None else None for h in snap.block_hash],
        "fq": list(snap.free_queue),
        "tables": [
            [rid, snap.request_status.get(rid, ""), list(ids), table_states(snap, rid, hits)]
            for rid, ids in snap.block_tables.items() if ids
        ],
        "hashes": [
            [short_hash(h), list(ids), tokens_label(contents.get(h), run.token_text)]
            for h, ids in snap.hash_table.items() if ids
        ],
        "evictions": snap.num_evictions,
        "kind": event.kind if event is not None else "start",
        "touched": touched_blocks(event),
        "evicted": touched_blocks(event) if event is not None and event.kind == "evicted" else [],
        "card": {"head": card.head, "tag": card.tag, "body": card.body, "note": card.note},
    }


def playback(run: ScenarioRun, contents: dict[bytes, list[int]]) -> dict[str, object]:
    """Every state of ``run`` (``frames[i]`` = after ``i`` events), the jump targets and the predict questions.

    The browser player gets this once per scenario and steps, scrubs, animates and asks
    "predict the victim" with no server round trip.
    """
    timeline = run.timeline()
    frames, free_queues = [], []
    for pos in range(len(run.events) + 1):
        snap = timeline.state_at(pos)
        frames.append(frame(run, contents, snap, pos))  # use the cursor before moving it
        free_queues.append(list(snap.free_queue))
    jumps = {
        name: [i + 1 for i, e in enumerate(run.events) if e.kind in kinds]
        for name, kinds in JUMPS.items()
    }
    questions = predict_questions(run, free_queues)
    return {"policy": run.free_policy, "num_blocks": run.num_blocks, "block_size": run.block_size,
            "frames": frames, "jumps": jumps, "questions": questions}


def alignment(primary: ScenarioRun, other: ScenarioRun) -> list[int]:
    """``align_index`` for every position of ``primary``: which state of ``other`` matches it."""
    return [align_index(primary, other, i) for i in range(len(primary.events) + 1)]
