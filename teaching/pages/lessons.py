"""The Lessons page without Streamlit: one lesson at one position, everything the page shows of it.

:class:`LessonSession` is the page's typed state for the lesson on screen: the lesson, its runs (one
per policy, played once), where the student is, and what that position shows (the script with the
line just played, the log of what happened, the player's step and outlined blocks). The page keeps it
in ``st.session_state`` and draws it; the rules live in :mod:`teaching.lessons.flow`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.timeline import block_contents
from teaching.lessons import flow
from teaching.lessons.loader import Lesson
from teaching.pages.playback import Playback, playback
from teaching.scenarios.scenario import ScenarioRun, run_scenario


@dataclass(frozen=True)
class ScriptRow:
    """One scenario line as the student reads it: ``now`` (just played), ``next`` or plain."""

    number: int
    text: str
    mark: str  # "now" | "next" | ""


@dataclass(frozen=True)
class PolicyView:
    """One policy's picture at the position: the player's timeline, its step and the line's blocks."""

    policy: str
    data: Playback
    step: int
    touched: list[int]


@dataclass
class LessonSession:
    """A lesson being stepped through: played once per policy, then moved line by line."""

    lesson: Lesson
    position: int = 0
    runs: dict[str, ScenarioRun] = field(default_factory=dict)
    _playbacks: dict[str, Playback] = field(default_factory=dict, repr=False)

    @classmethod
    def start(cls, lesson: Lesson, wanted: int | str | None = 0) -> LessonSession:
        runs = {policy: run_scenario(lesson.scenario, policy) for policy in lesson.policies}
        return cls(lesson, flow.clamp_position(lesson, wanted), runs)

    @property
    def first(self) -> ScenarioRun:
        return self.runs[self.lesson.policies[0]]

    def move_to(self, wanted: int | str | None) -> int:
        """Go to just after line ``wanted`` (0: before the first), kept to a line that does something."""
        self.position = flow.clamp_position(self.lesson, wanted)
        return self.position

    @property
    def places(self) -> list[int]:
        return flow.positions(self.lesson)

    def step_to(self, delta: int) -> int:
        """The position ``delta`` lines away (not moving there)."""
        return flow.step_from(self.lesson, self.position, delta)

    @property
    def step_label(self) -> str:
        return f"Step {self.places.index(self.position)} of {len(self.places) - 1}"

    def playback(self, policy: str) -> Playback:
        """The player's timeline of one policy's run, built once."""
        if policy not in self._playbacks:
            run = self.runs[policy]
            self._playbacks[policy] = playback(run, block_contents(run.events))
        return self._playbacks[policy]

    def views(self) -> list[PolicyView]:
        """Each policy's picture after the current line: the state, and the blocks this line touched."""
        return [
            PolicyView(policy, self.playback(policy), flow.state_index(run, self.position),
                       sorted(flow.touched_blocks(run, self.position)))
            for policy, run in self.runs.items()
        ]

    def script(self) -> list[ScriptRow]:
        """The scenario as shown: the line just played marked ``now``, the next one ``next``."""
        upcoming = self.step_to(+1)
        return [
            ScriptRow(number, text, "now" if number == self.position
                      else "next" if number == upcoming and upcoming != self.position else "")
            for number, text in enumerate(flow.shown_scenario(self.lesson), start=1)
        ]

    def happened(self) -> list[flow.LogItem]:
        """What the current line did, event by event (nothing before the first line)."""
        return flow.what_happened(self.first, self.position) if self.position else []

    @property
    def note(self) -> str:
        return flow.line_note(self.first, self.position) if self.position else ""

    def next_question_line(self) -> int | None:
        """The next line with a question, when none is asked here."""
        if flow.questions_at(self.lesson, self.position):
            return None
        return next((p for p in flow.moments_with_questions(self.lesson) if p > self.position), None)

    @property
    def event_index(self) -> int:
        """The first run's state at this position (the lab opens there)."""
        return flow.state_index(self.first, self.position)
