"""The Lessons page under AppTest: every lesson renders, steps, and checks answers against the engine."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from teaching.lessons import answer_question, load_lessons

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


def charts(at: AppTest) -> list:
    return at.get("plotly_chart")


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_every_lesson_renders_plays_and_asks(lesson) -> None:
    at = open_page(lesson.slug)
    assert at.header[0].value == lesson.title
    assert len(charts(at)) == 3 * len(lesson.policies)  # grid, free queue, block tables per policy
    assert len(at.radio) == len(lesson.questions)
    for radio, question in zip(at.radio, lesson.questions):
        assert list(radio.options) == list(answer_question(lesson, question).options)
    # Step through every scenario line: no exception, and the log names the line.
    for line_no in lesson.action_lines:
        at.button(key=f"lesson_pos_{lesson.slug}_next").click().run()
        assert not at.exception, (line_no, [e.value for e in at.exception])
        assert at.session_state[f"lesson_pos_{lesson.slug}"] == line_no
        assert any(f"Line {line_no}:" in m.value for m in at.markdown)


def _question_keys(lesson, question) -> tuple[str, str, str]:
    return (f"lesson_choice_{lesson.slug}_{question.id}", f"check_{lesson.slug}_{question.id}",
            f"reveal_{lesson.slug}_{question.id}")


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_right_and_wrong_answers_get_the_engines_verdict(lesson) -> None:
    at = open_page(lesson.slug)
    for question in lesson.questions:
        answer = answer_question(lesson, question)
        choice, check, _ = _question_keys(lesson, question)
        wrong = next(o for i, o in enumerate(answer.options) if i != answer.correct_index)
        at.radio(key=choice).set_value(wrong)
        at.button(key=check).click().run()
        assert any("Not quite" in e.value and wrong in e.value for e in at.error), question.id
        at.radio(key=choice).set_value(answer.options[answer.correct_index])
        at.button(key=check).click().run()
        assert any("Right!" in s.value and answer.text in s.value for s in at.success), question.id
    assert not at.exception


def test_check_without_a_choice_asks_for_one_and_reveal_jumps_to_the_line() -> None:
    lesson = next(lesson for lesson in LESSONS if lesson.slug.startswith("06"))
    question = lesson.questions[0]
    at = open_page(lesson.slug)
    _, check, reveal = _question_keys(lesson, question)
    at.button(key=check).click().run()
    assert any("Pick an answer first" in w.value for w in at.warning)
    at.button(key=reveal).click().run()
    answer = answer_question(lesson, question)
    assert any(f"The engine says **{answer.text}**" in i.value for i in at.info)
    assert at.session_state[f"lesson_pos_{lesson.slug}"] == question.after
    assert any(f"after line {question.after}" in m.value for m in at.markdown)


def test_side_by_side_lesson_draws_both_policies() -> None:
    lesson = next(lesson for lesson in LESSONS if lesson.policies == ("vllm", "classic"))
    at = open_page(lesson.slug)
    assert len(charts(at)) == 6
    assert any("**classic**" in m.value for m in at.markdown)


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
    assert at.session_state["custom_text"] == lesson.scenario_text
    assert at.session_state["lab_source"] == "custom"
    assert at.session_state["lab_pos"] > 0
    assert any("eviction lab" in m.value for m in at.markdown)
    assert not at.title  # the Lessons page is gone: the lab page runs


def test_a_new_prediction_clears_the_old_verdict() -> None:
    lesson = LESSONS[0]
    question = lesson.questions[0]
    answer = answer_question(lesson, question)
    choice, check, _ = _question_keys(lesson, question)
    at = open_page(lesson.slug)
    at.radio(key=choice).set_value(answer.options[answer.correct_index])
    at.button(key=check).click().run()
    assert at.success
    wrong = next(o for i, o in enumerate(answer.options) if i != answer.correct_index)
    at.radio(key=choice).set_value(wrong).run()
    assert not at.success and not at.error
