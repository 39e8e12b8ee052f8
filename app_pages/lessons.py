"""Lessons: a guided course through prefix caching, each lesson a live scenario played step by step.

Thin page (layout only). :mod:`teaching.lessons.loader` reads and checks ``lessons/*.md``; the lesson on
screen is a :class:`teaching.pages.lessons.LessonSession` kept in the session; the player draws its
pool at each line (``ui.lessons.pictures``); every answer comes from the engine, never from the lesson
file. Set ``PREFIXLAB_LESSONS_DIR`` to read lessons elsewhere.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import streamlit as st

from teaching.lessons import flow
from teaching.lessons.loader import Lesson, LessonError, load_lessons
from teaching.pages.lessons import LessonSession
from ui import lessons as views
from ui.persist import copy_back, mirror
from ui.projector import projector_on
from ui.style import LESSONS_CSS

LESSONS_DIR = Path(os.environ.get("PREFIXLAB_LESSONS_DIR", Path(__file__).resolve().parent.parent / "lessons"))
PROSE_HEIGHT = 250  # px: the lesson's text scrolls in its own box, so the stepping starts on the first screen
SCROLL_TOP = """<script>
for (const el of [document.querySelector('[data-testid="stMain"]'), document.scrollingElement]) { if (el) el.scrollTo(0, 0); }
</script>"""


@st.cache_resource(show_spinner=False, max_entries=4)
def _load(folder: str, stamp: tuple) -> tuple[list[Lesson], list[LessonError]]:
    return load_lessons(folder)  # cached by file times: an edited lesson shows up on the next rerun


def session_for(lesson: Lesson) -> LessonSession:
    """The lesson's session (played once), at the position the buttons or a shared URL ask for."""
    session = st.session_state.get("lesson_session")
    if not isinstance(session, LessonSession) or session.lesson is not lesson:
        session = st.session_state["lesson_session"] = LessonSession.start(lesson)
    key = views.pos_key(lesson)
    if key not in st.session_state:  # first visit: a shared URL may name the line
        st.session_state[key] = st.query_params.get("line")
    st.session_state[key] = session.move_to(st.session_state[key])
    return session


def scenario_section(session: LessonSession) -> None:
    """Prose and the scenario text on top; below, the pictures beside the step controls and questions."""
    lesson, position = session.lesson, session.position
    projector = projector_on()
    if not projector:  # projected, the picture and Next come first and the text follows in the page
        prose_and_script(session, height=PROSE_HEIGHT)
        st.subheader("Step through it: the cache " + flow.position_label(lesson, position), divider="gray", anchor="step")
    views.step_controls(session)
    pictures, side = st.columns([1.15, 1], gap="medium")
    with side:
        for moment in flow.questions_at(lesson, position):
            views.question_card(lesson, moment)
        st.markdown(views.log_html(session), unsafe_allow_html=True)
        later = session.next_question_line()
        if later is not None:
            st.caption(f"Next question: after line {later} (press → to get there).")
        st.button("Open in the lab, event by event", icon=":material/grid_view:", key=f"lab_{lesson.slug}",
                  on_click=views.open_in_lab, args=(lesson, session.event_index),
                  help="The eviction lab steps through every single event of this scenario, forwards and backwards")
    with pictures:
        st.caption("Blocks with a thick solid outline are the ones this line allocated or hit.")
        views.pictures(session, projector)
    if projector:
        st.subheader("The lesson", divider="gray", anchor="text")
        prose_and_script(session, height="content")


def prose_and_script(session: LessonSession, height: int | Literal["content"]) -> None:
    """The lesson's text beside its scenario; in a box of ``height`` px that scrolls, or in the page flow."""
    prose, script = st.columns([1.3, 1], gap="medium")
    with prose, st.container(height=height, border=False):
        st.markdown(flow.body_markdown(session.lesson.body))
    with script, st.container(height=height, border=False):
        st.markdown(f"**The scenario** · played on the simulator: {session.first.num_blocks} blocks (block 0 is "
                    f"reserved) × {session.first.block_size} tokens per block.")
        st.markdown(views.script_html(session), unsafe_allow_html=True)


def lesson_picker(lessons: list[Lesson]) -> Lesson:
    slugs = [lesson.slug for lesson in lessons]
    wanted = st.query_params.get("lesson")
    if st.session_state.get("lessons_pick") not in slugs:  # first visit, or a lesson file was removed or broke
        st.session_state["lessons_pick"] = wanted if wanted in slugs else slugs[0]
    titles = {lesson.slug: f"{n}. {lesson.title}" for n, lesson in enumerate(lessons, start=1)}
    slug = st.selectbox("Lesson", slugs, key=mirror("lessons_pick"), on_change=copy_back("lessons_pick"),
                        format_func=titles.__getitem__, label_visibility="collapsed")
    if st.query_params.get("lesson") != slug:
        st.query_params.pop("line", None)  # a line number belongs to the lesson it was shared with
        st.session_state["lessons_scroll_top"] = True
    st.query_params["lesson"] = slug
    return lessons[slugs.index(slug)]


def go_to_lesson(slug: str) -> None:
    """Callback: open another lesson at its top."""
    st.session_state.update(lessons_pick=slug, lessons_scroll_top=True)


def main() -> None:
    st.markdown(LESSONS_CSS, unsafe_allow_html=True)
    if st.session_state.pop("lessons_go_lab", False):
        st.switch_page("app_pages/lab.py")
    projector = projector_on()
    if projector:  # the lesson picker names the lesson; the right end is the Projector switch's
        picker, _ = st.columns([4, 1], vertical_alignment="bottom")
    else:
        heading, picker = st.columns([1, 2.6], vertical_alignment="bottom")
        heading.title("Lessons")
    if not LESSONS_DIR.is_dir():
        st.error(f"No lessons folder at {LESSONS_DIR}.")
        return
    lessons, errors = _load(str(LESSONS_DIR), tuple((p.name, p.stat().st_mtime) for p in sorted(LESSONS_DIR.glob("*.md"))))
    if errors:
        with st.expander(f"{len(errors)} lesson file(s) could not be loaded", expanded=not lessons, icon=":material/error:"):
            for error in errors:
                st.error(str(error))
    if not lessons:
        st.info("There are no lessons to show yet. See lessons/README.md for the format.")
        return
    with picker:
        lesson = lesson_picker(lessons)
    if st.session_state.pop("lessons_scroll_top", False):
        st.html(SCROLL_TOP, unsafe_allow_javascript=True)  # a new lesson opens at its top, not where the last one ended
    session = session_for(lesson)
    if not projector:
        st.header(lesson.title)
        if lesson.summary:
            st.caption(lesson.summary)
    if lesson is lessons[0] and session.position == 0 and not projector:
        st.info("**New here?** Read a few lines, then press **Next** (or →) to play the scenario one line at a "
                "time and watch the blocks below. Questions appear beside the picture when it is their moment: "
                "predict, check, and the engine tells you why.", icon=":material/waving_hand:")
    scenario_section(session)
    if lesson.measure is not None:
        views.measure_section(lesson)
    number = [item.slug for item in lessons].index(lesson.slug)
    if number + 1 < len(lessons):
        st.button(f"Next lesson: {lessons[number + 1].title}", icon=":material/arrow_forward:",
                  key="lessons_next_lesson", on_click=go_to_lesson, args=(lessons[number + 1].slug,))


main()
