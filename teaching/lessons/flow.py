"""A lesson as a guided flow: where the student is, what to show there, and what to say about an answer.

The Lessons page is widgets only; every decision it makes lives here, without Streamlit:

* the student's position is a scenario line (0 = before the first one); ← → move between the
  lines that do something;
* each question belongs to a *moment*: it is asked just before the line it is about is played
  ("predict"), and stays beside the picture once that line has played ("look");
* the text on screen never shows lesson markup (``# @label`` comments, answer expressions).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.events import BlocksAllocated, BlocksTouched, Event
from engine.timeline import block_contents
from engine.vllm_versions import FREE_POLICY_VERSIONS
from teaching.lessons.answers import order_hint, wrong_answer_feedback
from teaching.lessons.loader import Answer, Lesson, Question
from teaching.limits import parse_whole_number
from teaching.scenarios.describe import EVENT_TAGS, describe_event, without_markup
from teaching.scenarios.scenario import ActionSpan, ScenarioRun

#: Events that make the step log too chatty for a beginner.
QUIET_KINDS = frozenset({"token", "step", "schedule"})
_LABEL_INSIDE = re.compile(r"\s*@[A-Za-z0-9_\-]+")

PREDICT = "predict"  # the question's line is the next one to play
LOOK = "look"  # the question's line has just played: the picture shows the answer


# -- positions -------------------------------------------------------------------------------------------
def positions(lesson: Lesson) -> list[int]:
    """Every place the student can stand: before the first line, then after each line that does something."""
    return [0, *lesson.action_lines]


def clamp_position(lesson: Lesson, wanted: int | str | None) -> int:
    """A position from the URL or the session, or 0 when it is not one of this lesson's positions."""
    number = wanted if isinstance(wanted, int) else parse_whole_number(wanted, 0, 10**6)
    return number if number in positions(lesson) else 0


def step_from(lesson: Lesson, position: int, delta: int) -> int:
    """The position ``delta`` lines of action forwards (or backwards), stopping at the ends."""
    places = positions(lesson)
    index = places.index(position) if position in places else 0
    return places[max(0, min(len(places) - 1, index + delta))]


def previous_line(lesson: Lesson, line_no: int) -> int:
    """The position just before ``line_no`` plays."""
    return step_from(lesson, line_no, -1)


# -- what the screen shows ----------------------------------------------------------------------------
def shown_scenario(lesson: Lesson) -> list[str]:
    """The scenario's lines as a student reads them: ``# @label`` comments (lesson markup) removed."""
    return [_without_labels(line) for line in lesson.scenario_text.rstrip().splitlines()]


def _without_labels(line: str) -> str:
    """``step  # @r0-prefill`` -> ``step``; ``run  # @done all finish`` -> ``run  # all finish``."""
    return without_markup(line)


def shown_line(lesson: Lesson, line_no: int) -> str:
    """One scenario line, squeezed and without markup (for captions)."""
    lines = shown_scenario(lesson)
    return " ".join(lines[line_no - 1].split()) if 0 < line_no <= len(lines) else ""


def body_markdown(body: str) -> str:
    """Lesson sections (``##``) render as small headings under the lesson's own title."""
    return re.sub(r"^(#{1,3}) ", lambda m: "#" * (len(m.group(1)) + 2) + " ", body, flags=re.MULTILINE)


def position_label(lesson: Lesson, position: int) -> str:
    return "before the first line" if position == 0 else f"after line {position}"


def line_span(run: ScenarioRun, line_no: int) -> ActionSpan | None:
    return next((s for s in run.spans if s.action.line_no == line_no), None)


def state_index(run: ScenarioRun, line_no: int) -> int:
    """How many events have happened once ``line_no`` has been played."""
    span = line_span(run, line_no)
    return span.end if span else 0


def line_events(run: ScenarioRun, line_no: int) -> list[Event]:
    span = line_span(run, line_no)
    return run.events[span.start : span.end] if span else []


def touched_blocks(run: ScenarioRun, line_no: int) -> set[int]:
    """Blocks the line allocated or hit: the ones the pictures outline."""
    return {b for e in line_events(run, line_no) if isinstance(e, (BlocksAllocated, BlocksTouched)) for b in e.block_ids}


@dataclass(frozen=True)
class LogItem:
    tag: str  # short event tag, e.g. ALLOC
    text: str  # the event in plain words


def what_happened(run: ScenarioRun, line_no: int) -> list[LogItem]:
    """The line's events in plain words, in the order they happened (token/step chatter left out)."""
    contents = block_contents(run.events)
    return [
        LogItem(EVENT_TAGS.get(e.kind, e.kind.upper()), describe_event(e, run.token_text, contents))
        for e in line_events(run, line_no)
        if e.kind not in QUIET_KINDS
    ]


def line_note(run: ScenarioRun, line_no: int) -> str:
    """The comment the lesson wrote on that line, if any (markup removed)."""
    span = line_span(run, line_no)
    return _LABEL_INSIDE.sub("", span.note).strip() if span and span.note else ""


# -- questions at their moment ---------------------------------------------------------------------------
@dataclass(frozen=True)
class MomentQuestion:
    number: int  # 1-based, as the lesson lists them
    question: Question
    phase: str  # PREDICT or LOOK


def questions_at(lesson: Lesson, position: int) -> list[MomentQuestion]:
    """The questions to show beside the picture at ``position``.

    A question about line L is asked at the position just before L (predict from the picture,
    then press → to see it happen), and it stays while the picture shows the moment after L.
    """
    upcoming = step_from(lesson, position, +1)
    found = []
    for number, question in enumerate(lesson.questions, start=1):
        if question.after == position and position != 0:
            found.append(MomentQuestion(number, question, LOOK))
        elif question.after == upcoming and upcoming != position:
            found.append(MomentQuestion(number, question, PREDICT))
    return found


def moments_with_questions(lesson: Lesson) -> list[int]:
    """Positions where a question is asked (for a 'next question' jump and the progress line)."""
    return sorted({previous_line(lesson, q.after) for q in lesson.questions})


def question_prompt(lesson: Lesson, moment: MomentQuestion) -> str:
    """The line above a question saying which moment it is about."""
    q = moment.question
    rule = f" (under {FREE_POLICY_VERSIONS[q.policy]})" if len(lesson.policies) > 1 else ""
    line = f"line {q.after}: `{shown_line(lesson, q.after)}`"
    if moment.phase == PREDICT:
        return f"Predict, then press **Next →** to play {line}{rule}."
    return f"The picture shows the moment after {line}{rule}."


# -- verdicts --------------------------------------------------------------------------------------------
RIGHT, WRONG, EMPTY, REVEALED = "right", "wrong", "empty", "revealed"


def verdict_for(answer: Answer, choice: str | None) -> str:
    if choice is None:
        return EMPTY
    return RIGHT if answer.is_correct(choice) else WRONG


def engine_says(lesson: Lesson, question: Question, answer: Answer) -> str:
    """The engine's answer in words, with no answer expression (``num_blocks r0``) on screen."""
    meaning = question.answer.word.meaning
    if question.answer.arg is not None and question.answer.word.arg == "request":
        meaning = meaning.replace("the request", str(question.answer.arg))
    elif question.answer.word.arg == "block":
        meaning = meaning.replace("the block", f"block {question.answer.arg}")
    rule = f", {FREE_POLICY_VERSIONS[question.policy]}" if len(lesson.policies) > 1 else ""
    return f"The engine says **{answer.text}** ({meaning}, after line {question.after}{rule})."


def feedback(lesson: Lesson, question: Question, answer: Answer, verdict: str | None, choice: str | None) -> str:
    """What to say under a question for a verdict: right, wrong (naming the rule missed), revealed."""
    if verdict == EMPTY:
        return "Pick an answer first, then press Check."
    if verdict == RIGHT:
        return f"Right! {engine_says(lesson, question, answer)}"
    if verdict == WRONG and choice is not None:
        return (wrong_answer_feedback(question.answer, choice, answer.value, question.rule)
                + f" Step to line {question.after} and look again, or press Reveal.")
    if verdict == REVEALED:
        return f"{engine_says(lesson, question, answer)} The picture now shows the moment after line {question.after}."
    return ""


def answer_hint(question: Question) -> str:
    """Shown under the options: whether the order of the blocks matters."""
    return order_hint(question.answer)
