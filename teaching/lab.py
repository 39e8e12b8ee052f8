"""The lab's logic without Streamlit: both policies' runs, aligning them, jumps, predict questions.

Everything here is a plain function over :class:`~teaching.scenario.ScenarioRun`, so the page
stays thin and these rules are unit-testable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from engine.events import BlockRemoved, BlocksAllocated, Event, StepStarted
from engine.kv_cache import FREE_POLICIES
from engine.timeline import block_contents
from teaching import limits
from teaching.scenario import ScenarioRun, parse_scenario, run_scenario

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
    """Parse once, play under each policy. Raises :class:`~teaching.scenario.ScenarioError`."""
    scenario = parse_scenario(text)
    runs = {
        # One time budget for both runs together: the lab plays each scenario twice.
        policy: run_scenario(scenario, policy, block_size=block_size, num_blocks=num_blocks, hash_algo=hash_algo,
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
