"""The guided flow's logic: positions, questions at their moment, text without markup, feedback."""

from __future__ import annotations

from pathlib import Path

from teaching.lessons import flow
from teaching.lessons.answers import order_hint, parse_expression, wrong_answer_feedback
from teaching.lessons.loader import answer_question, load_lessons

LESSONS = {lesson.slug: lesson for lesson in load_lessons(Path(__file__).resolve().parents[2] / "lessons")[0]}


def test_positions_and_steps_stop_at_the_ends() -> None:
    lesson = LESSONS["01-kv-blocks"]
    places = flow.positions(lesson)
    assert places[0] == 0 and places[1:] == lesson.action_lines
    assert flow.step_from(lesson, 0, -1) == 0
    assert flow.step_from(lesson, places[-1], +1) == places[-1]
    assert flow.clamp_position(lesson, "nope") == 0 and flow.clamp_position(lesson, str(places[2])) == places[2]


def test_each_question_is_asked_just_before_its_line_and_stays_after_it() -> None:
    lesson = LESSONS["01-kv-blocks"]
    for number, question in enumerate(lesson.questions, start=1):
        before = flow.previous_line(lesson, question.after)
        assert (number, flow.PREDICT) in [(m.number, m.phase) for m in flow.questions_at(lesson, before)]
        assert (number, flow.LOOK) in [(m.number, m.phase) for m in flow.questions_at(lesson, question.after)]


def test_scenario_shown_without_label_markup() -> None:
    lesson = LESSONS["01-kv-blocks"]
    shown = "\n".join(flow.shown_scenario(lesson))
    assert "@" not in shown and "step" in shown
    assert len(flow.shown_scenario(lesson)) == len(lesson.scenario_text.rstrip().splitlines())  # line numbers hold
    assert flow._without_labels("run  # @done all finish") == "run  # all finish"


def test_engine_says_names_the_meaning_not_the_expression() -> None:
    lesson = LESSONS["01-kv-blocks"]
    question = lesson.questions[0]
    text = flow.engine_says(lesson, question, answer_question(lesson, question))
    assert "num_blocks" not in text and "r0" in text and "@" not in text


def test_order_hints_and_rule_named_feedback() -> None:
    assert order_hint(parse_expression("free_queue")).startswith("Order matters: list the blocks head first")
    assert order_hint(parse_expression("cached_blocks")) == "Order does not matter."
    assert order_hint(parse_expression("ref_cnt 1")) == ""
    text = wrong_answer_feedback(parse_expression("hit_blocks r1"), "1", [1, 2])
    assert "leaves out 2" in text and "stops at the first miss" in text
