"""Walk every lesson question as a student would meet it.

Two promises of the Lessons page (issue 21, item 2):

* a question's *moment* (the hit, the eviction, the preemption) is a step the picture shows:
  the line the question is asked after must not run past it (a ``run`` that finishes the
  request holding the hit blocks would show a pool where the hit is already gone);
* every wrong option's feedback names the rule that question tests (a LoRA question must hear
  about the adapter, not about the last token).

The rule table below is written by hand, on purpose: it is the test's own reading of what each
question is about, independent of the lesson files and of the default rules in answers.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.events import BlockRemoved, BlocksAllocated, CacheLookup, RequestPreempted
from teaching.lessons.answers import EngineState, engine_state_after, evaluate, parse_expression
from teaching.lessons.flow import WRONG, feedback
from teaching.lessons.loader import Lesson, Question, check_lesson, load_lessons

LESSONS = Path(__file__).resolve().parents[2] / "lessons"

#: (lesson number, question number) -> words the wrong-answer feedback must contain (any one of them).
RULE_WORDS: dict[tuple[str, int], tuple[str, ...]] = {
    ("01", 1): ("rounded up",),
    ("01", 2): ("full",),
    ("01", 3): ("head of the free queue",),
    ("01", 4): ("block 0",),
    ("02", 1): ("parent",),
    ("02", 2): ("parent",),
    ("02", 3): ("parent",),
    ("03", 1): ("earlier request",),
    ("03", 2): ("full block",),
    ("03", 3): ("ref count",),
    ("03", 4): ("hit rate",),
    ("04", 1): ("last token",),
    ("04", 2): ("last token",),
    ("04", 3): ("partial",),
    ("04", 4): ("partial",),
    ("05", 1): ("first miss",),
    ("05", 2): ("first miss",),
    ("05", 3): ("first miss",),
    ("05", 4): ("full block",),
    ("06", 1): ("tail",),
    ("06", 2): ("lazy",),
    ("06", 3): ("head",),
    ("06", 4): ("lazy",),
    ("06", 5): ("evicted",),
    ("07", 1): ("first miss",),
    ("07", 2): ("head",),
    ("07", 3): ("tail",),
    ("07", 4): ("popped",),
    ("07", 5): ("popped",),
    ("08", 1): ("LoRA",),
    ("08", 2): ("salt",),
    ("08", 3): ("salt",),
    ("09", 1): ("preempt",),
    ("09", 2): ("popped",),
    ("09", 3): ("preempt",),
    ("09", 4): ("evicted",),
    ("09", 5): ("preempt",),
    ("10", 1): ("head",),
    ("10", 2): ("tail",),
    ("10", 3): ("popped",),
    ("10", 4): ("popped",),
    ("10", 5): ("evicted",),
    ("10", 6): ("evicted",),
    ("11", 1): ("first miss",),
    ("11", 2): ("first miss",),
    ("11", 3): ("salt",),
    ("11", 4): ("salt",),
    ("12", 1): ("window",),
    ("12", 2): ("window",),
    ("12", 3): ("every KV cache group",),
    ("12", 4): ("hit rate",),
    ("13", 1): ("evicted",),
    ("13", 2): ("device",),
    ("13", 3): ("host tier",),
}

#: Rules a question must NOT be given because they are about something else (issue 21's slips).
WRONG_RULE_WORDS: dict[tuple[str, int], tuple[str, ...]] = {
    ("08", 1): ("last token", "logits"),
    ("08", 2): ("last token", "logits"),
    ("08", 3): ("last token", "logits"),
    ("01", 4): ("ref count",),
}


def _lessons() -> list[Lesson]:
    lessons, errors = load_lessons(LESSONS)
    assert not errors, [str(e) for e in errors]
    return lessons


def _cases() -> list[tuple[Lesson, int, Question]]:
    return [(lesson, n, q) for lesson in _lessons() for n, q in enumerate(lesson.questions, start=1)]


CASES = _cases()


def _status(state: EngineState, request_id: str) -> str:
    return str(evaluate(parse_expression(f"status {request_id}"), state))


def moment_problem(state: EngineState, question: Question) -> str:
    """Why the picture after the question's line does not show its moment ('' when it does)."""
    word, arg = question.answer.word.name, question.answer.arg
    events = state.line_events
    if word in ("hit_blocks", "num_cached_tokens"):
        if not any(isinstance(e, CacheLookup) and e.request_id == arg for e in events):
            return f"{arg}'s cache lookup is not played by this line"
        if _status(state, str(arg)) != "running":
            return f"{arg} is {_status(state, str(arg))} after this line, so its hit blocks are not in the picture"
    elif word == "evicted_blocks":
        takers = [e.request_id for e in events if isinstance(e, BlockRemoved) and e.request_id]
        takers = takers or [e.request_id for e in events if isinstance(e, BlocksAllocated)]
        if not takers:
            return "nothing is allocated by this line"
        if not any(_status(state, r) == "running" for r in takers):
            return f"{', '.join(dict.fromkeys(takers))} already finished, so the blocks it took are not in the picture"
    elif word == "num_preemptions" or (word == "status" and evaluate(question.answer, state) == "preempted"):
        if not any(isinstance(e, RequestPreempted) and e.request_id == arg for e in events):
            return f"{arg}'s preemption is not played by this line"
    elif word in ("block_table", "num_blocks", "num_full_blocks"):
        if _status(state, str(arg)) != "running":
            return f"{arg} holds no blocks after this line"
    return ""


def _case_id(case: tuple[Lesson, int, Question]) -> str:
    return f"{case[0].slug[:2]}-q{case[1]}"


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_the_picture_shows_the_moment_the_question_is_about(case: tuple[Lesson, int, Question]) -> None:
    lesson, _, question = case
    state = engine_state_after(lesson.scenario, question.after, question.policy)
    problem = moment_problem(state, question)
    assert not problem, f"{lesson.slug} {question.id} (after line {question.after}): {problem}"


def test_the_table_covers_every_question() -> None:
    assert {(c[0].slug[:2], c[1]) for c in CASES} == set(RULE_WORDS)


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_every_wrong_option_names_the_rule_the_question_tests(case: tuple[Lesson, int, Question]) -> None:
    lesson, number, question = case
    answer = check_lesson_cached(lesson)[question.id]
    wanted = RULE_WORDS[(lesson.slug[:2], number)]
    unwanted = WRONG_RULE_WORDS.get((lesson.slug[:2], number), ())
    wrong = [o for i, o in enumerate(answer.options) if i != answer.correct_index]
    assert wrong
    for option in wrong:
        text = feedback(lesson, question, answer, WRONG, option)
        assert any(w.lower() in text.lower() for w in wanted), f"{lesson.slug} {question.id}: {text!r} names none of {wanted}"
        assert not any(w.lower() in text.lower() for w in unwanted), f"{lesson.slug} {question.id}: {text!r} names another rule"


_ANSWERS: dict[str, dict] = {}


def check_lesson_cached(lesson: Lesson) -> dict:
    if lesson.slug not in _ANSWERS:
        _ANSWERS[lesson.slug] = check_lesson(lesson)
    return _ANSWERS[lesson.slug]
