"""The lab's logic without Streamlit: both policies' runs, aligning them, the event log's window.

Everything here is a plain function over :class:`~teaching.scenarios.scenario.ScenarioRun`, so the page
stays thin and these rules are unit-testable. The player's data (frames, jumps, predict questions) is
built by :mod:`teaching.pages.playback`, for any engine's log.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from engine.events import Event
from engine.kv_cache import FREE_POLICIES
from engine.timeline import block_contents
from engine.vllm_versions import resolve_vllm_version
from teaching import limits
from teaching.pages.playback import Playback, playback
from teaching.scenarios.scenario import ScenarioRun, parse_scenario, run_scenario


@dataclass
class LabRuns:
    """One scenario played under every free policy, plus the hash -> tokens map of each."""

    text: str
    runs: dict[str, ScenarioRun]
    contents: dict[str, dict[bytes, list[int]]] = field(default_factory=dict)
    _playbacks: dict[str, Playback] = field(default_factory=dict, repr=False)

    def playback(self, policy: str) -> Playback:
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


def alignment(primary: ScenarioRun, other: ScenarioRun) -> list[int]:
    """``align_index`` for every position of ``primary``: which state of ``other`` matches it."""
    return [align_index(primary, other, i) for i in range(len(primary.events) + 1)]
