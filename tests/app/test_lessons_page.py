"""The Lessons page under AppTest: every lesson renders, steps, and checks answers against the engine."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from teaching.lessons import flow
from teaching.lessons.loader import answer_question, load_lessons
from teaching.scenarios.scenario import run_scenario
from tests.app.conftest import player_args

ROOT = Path(__file__).resolve().parents[2]
PAGE = str(ROOT / "app_pages" / "lessons.py")
LESSONS, _ = load_lessons(ROOT / "lessons")


def open_page(lesson_slug: str | None = None) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60)
    if lesson_slug is not None:
        at.session_state["lessons_pick"] = lesson_slug
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def charts(at: AppTest) -> list[dict]:
    """The pictures: one player per policy (pool, free queue, block tables, hash table), no Plotly chart, no HTML twin."""
    assert not at.get("plotly_chart")
    assert not [h for h in at.html if "pl-pool" in h.value]
    return [player_args(e.proto) for e in at.get("component_instance") if "lab_player" in e.proto.component_name]


def at_position(at: AppTest, lesson, position: int) -> AppTest:  # type: ignore[no-untyped-def]
    at.session_state[f"lesson_pos_{lesson.slug}"] = position
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def shown_text(at: AppTest) -> str:
    """Everything a student reads on the page (markdown, captions, alerts, labels)."""
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption] + [c.value for c in at.code]
    parts += [a.value for kind in (at.info, at.success, at.error, at.warning) for a in kind]
    parts += [h.value for h in at.subheader]
    return "\n".join(parts)


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_every_lesson_renders_plays_and_asks_each_question_at_its_moment(lesson) -> None:
    at = open_page(lesson.slug)
    assert at.header[0].value == lesson.title
    assert len(charts(at)) == len(lesson.policies)  # the player: pool, free queue, block tables per policy
    asked: set[str] = set()
    for position in [0, *lesson.action_lines]:
        if position:
            at.button(key=f"lesson_pos_{lesson.slug}_next").click().run()
        assert not at.exception, (position, [e.value for e in at.exception])
        assert at.session_state[f"lesson_pos_{lesson.slug}"] == position
        if position:
            assert any(f"Line {position}:" in m.value for m in at.markdown)
        run = run_scenario(lesson.scenario, lesson.policies[0])
        (shown, *_) = charts(at)  # the lesson's line drives the player's step; it has no controls of its own
        assert (shown["mode"], shown["step"]) == ("view", flow.state_index(run, position))
        assert shown["touched"] == sorted(flow.touched_blocks(run, position))
        moments = flow.questions_at(lesson, position)
        assert len(at.radio) == len(moments)  # only this moment's questions, beside the picture
        for radio, moment in zip(at.radio, moments):
            assert list(radio.options) == list(answer_question(lesson, moment.question).options)
            asked.add(moment.question.id)
    assert asked == {q.id for q in lesson.questions}  # every question comes up on the way


def _question_keys(lesson, question) -> tuple[str, str, str]:
    return (f"_w_lesson_choice_{lesson.slug}_{question.id}", f"check_{lesson.slug}_{question.id}",
            f"reveal_{lesson.slug}_{question.id}")


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_right_and_wrong_answers_get_the_engines_verdict_and_the_rule(lesson) -> None:
    at = open_page(lesson.slug)
    for question in lesson.questions:
        at_position(at, lesson, flow.previous_line(lesson, question.after))
        answer = answer_question(lesson, question)
        choice, check, _ = _question_keys(lesson, question)
        wrong = next(o for i, o in enumerate(answer.options) if i != answer.correct_index)
        at.radio(key=choice).set_value(wrong)
        at.button(key=check).click().run()
        errors = [e.value for e in at.error]
        assert any("Not quite" in e and wrong in e and "The rule:" in e for e in errors), (question.id, errors)
        at.radio(key=choice).set_value(answer.options[answer.correct_index])
        at.button(key=check).click().run()
        assert any("Right!" in s.value and answer.text in s.value for s in at.success), question.id
    assert not at.exception


def test_wrong_order_is_named_and_order_dependent_answers_say_so() -> None:
    lesson = next(lesson for lesson in LESSONS if lesson.slug.startswith("01"))
    question = next(q for q in lesson.questions if q.answer.word.name == "block_table")
    answer = answer_question(lesson, question)
    at = at_position(open_page(lesson.slug), lesson, flow.previous_line(lesson, question.after))
    assert any(c.value.startswith("Order matters") for c in at.caption)
    reversed_option = ", ".join(reversed(answer.text.split(", ")))
    choice, check, _ = _question_keys(lesson, question)
    at.radio(key=choice).set_value(reversed_option)
    at.button(key=check).click().run()
    assert any("right blocks, but in the wrong order" in e.value for e in at.error)


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_no_lesson_markup_on_screen(lesson) -> None:
    at = open_page(lesson.slug)
    expressions = {str(q.answer) for q in lesson.questions if q.answer.arg is not None}
    for position in [0, *lesson.action_lines]:
        text = shown_text(at_position(at, lesson, position))
        for label in lesson.labels:
            assert f"@{label}" not in text, (position, label)
        for expression in expressions:
            assert f"`{expression}`" not in text and f"{expression} after" not in text, (position, expression)
        for question in flow.questions_at(lesson, position):
            at.button(key=f"reveal_{lesson.slug}_{question.question.id}").click().run()
            text = shown_text(at)
            assert not any(f"`{e}`" in text or f"({e} " in text for e in expressions), position
            at_position(at, lesson, position)


def test_check_without_a_choice_asks_for_one_and_reveal_plays_the_line_beside_the_question() -> None:
    lesson = next(lesson for lesson in LESSONS if lesson.slug.startswith("06"))
    question = lesson.questions[0]
    at = open_page(lesson.slug)
    at_position(at, lesson, flow.previous_line(lesson, question.after))
    _, check, reveal = _question_keys(lesson, question)
    at.button(key=check).click().run()
    assert any("Pick an answer first" in w.value for w in at.warning)
    at.button(key=reveal).click().run()
    answer = answer_question(lesson, question)
    assert any(f"The engine says **{answer.text}**" in i.value for i in at.info)
    assert at.session_state[f"lesson_pos_{lesson.slug}"] == question.after
    assert any(f"after line {question.after}" in h.value for h in at.subheader)
    assert at.button(key=reveal)  # the question is still there, beside the picture it is about


def test_a_prediction_survives_stepping_away_and_back() -> None:
    lesson = LESSONS[0]
    question = lesson.questions[0]
    answer = answer_question(lesson, question)
    ask_at = flow.previous_line(lesson, question.after)
    at = at_position(open_page(lesson.slug), lesson, ask_at)
    choice, _, _ = _question_keys(lesson, question)
    at.radio(key=choice).set_value(answer.options[1]).run()
    at_position(at, lesson, lesson.action_lines[-1])
    at_position(at, lesson, ask_at)
    assert at.radio(key=choice).value == answer.options[1]


def test_next_lesson_opens_at_its_top() -> None:
    at = open_page(LESSONS[0].slug)
    at.button(key="lessons_next_lesson").click().run()
    assert not at.exception
    assert at.header[0].value == LESSONS[1].title
    assert at.session_state[f"lesson_pos_{LESSONS[1].slug}"] == 0
    assert any("scrollTo(0, 0)" in str(h.proto) for h in at.get("html"))


def test_side_by_side_lesson_draws_both_policies() -> None:
    lesson = next(lesson for lesson in LESSONS if lesson.policies == ("vllm", "classic"))
    at = open_page(lesson.slug)
    assert len(charts(at)) == 2
    assert any("**vLLM 0.23 (classic)**" in m.value for m in at.markdown)


def test_broken_lesson_shows_its_file_and_line_and_the_others_still_load(tmp_path: Path, monkeypatch) -> None:
    good = (ROOT / "lessons" / "01-kv-blocks.md").read_text(encoding="utf-8")
    (tmp_path / "01-good.md").write_text(good, encoding="utf-8")
    broken = good.replace("\n  run  # @done", "\n  fly  # @done")
    assert broken != good
    (tmp_path / "02-broken.md").write_text(broken, encoding="utf-8")
    bad_line = next(n for n, line in enumerate(broken.splitlines(), start=1) if line.startswith("  fly"))
    monkeypatch.setenv("PREFIXLAB_LESSONS_DIR", str(tmp_path))
    at = open_page()
    messages = [e.value for e in at.error]
    assert any(m.startswith(f"02-broken.md, line {bad_line}:") and "unknown command 'fly'" in m for m in messages), messages
    assert at.selectbox(key="_w_lessons_pick").options == ["1. Tokens, KV blocks and paged attention"]
    assert at.header[0].value == "Tokens, KV blocks and paged attention"


def test_app_navigation_includes_the_lessons_page() -> None:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("app_pages/lessons.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "Lessons"
    assert at.header[0].value == LESSONS[0].title


def test_open_in_lab_hands_over_the_scenario_at_this_moment() -> None:
    lesson = next(lesson for lesson in LESSONS if lesson.slug.startswith("06"))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("app_pages/lessons.py")
    at.session_state["lessons_pick"] = lesson.slug
    at.session_state[f"lesson_pos_{lesson.slug}"] = lesson.action_lines[2]
    at.run()
    at.button(key=f"lab_{lesson.slug}").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["custom_text"] == "\n".join(flow.shown_scenario(lesson))  # no lesson markup
    assert "@" not in at.session_state["custom_text"]
    assert at.session_state["lab_source"] == "custom"
    assert at.session_state["lab_pos"] > 0
    assert any("eviction lab" in m.value for m in at.markdown)
    assert not at.title  # the Lessons page is gone: the lab page runs


def test_a_new_prediction_clears_the_old_verdict() -> None:
    lesson = LESSONS[0]
    question = lesson.questions[0]
    answer = answer_question(lesson, question)
    choice, check, _ = _question_keys(lesson, question)
    at = at_position(open_page(lesson.slug), lesson, flow.previous_line(lesson, question.after))
    at.radio(key=choice).set_value(answer.options[answer.correct_index])
    at.button(key=check).click().run()
    assert at.success
    wrong = next(o for i, o in enumerate(answer.options) if i != answer.correct_index)
    at.radio(key=choice).set_value(wrong).run()
    assert not at.success and not at.error
