"""The Lessons page's typed session (teaching.pages.lessons), built and moved without Streamlit."""

from __future__ import annotations

from pathlib import Path

from teaching.lessons import flow
from teaching.lessons.loader import load_lessons
from teaching.pages.lessons import LessonSession

LESSONS, _ = load_lessons(Path(__file__).resolve().parents[2] / "lessons")


def test_a_session_moves_line_by_line_and_the_player_follows() -> None:
    lesson = LESSONS[0]
    session = LessonSession.start(lesson, "not a line")
    assert session.position == 0 and session.step_label.startswith("Step 0 of ")
    assert session.happened() == [] and session.note == ""
    line = session.step_to(+1)
    session.move_to(line)
    (view,) = session.views()
    run = session.runs[lesson.policies[0]]
    assert view.step == flow.state_index(run, line) > 0
    assert view.touched == sorted(flow.touched_blocks(run, line))
    assert len(view.data.frames) == len(run.events) + 1 and session.playback(view.policy) is view.data
    assert [row.mark for row in session.script() if row.mark] == ["now", "next"]
    assert session.happened()  # the line did something, in words
    assert session.event_index == view.step


def test_a_side_by_side_lesson_has_one_view_per_policy() -> None:
    lesson = next(lesson for lesson in LESSONS if lesson.policies == ("vllm", "classic"))
    session = LessonSession.start(lesson, lesson.action_lines[-1])
    assert [v.policy for v in session.views()] == ["vllm", "classic"]
    assert session.next_question_line() is None or session.next_question_line() > session.position
