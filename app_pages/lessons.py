"""Lessons: a guided course through prefix caching, each lesson a live scenario played step by step.

Thin page (widgets only). :mod:`teaching.lessons.loader` reads and checks ``lessons/*.md``;
:mod:`teaching.lessons.flow` decides what each moment shows and says; the scenario is played
by the engine and drawn with the lab's figure builders (``viz``); every answer comes from the
engine, never from the lesson file. Set ``PREFIXLAB_LESSONS_DIR`` to read lessons elsewhere.
"""

from __future__ import annotations

import os
from html import escape
from pathlib import Path
from typing import Literal

import streamlit as st

from engine.timeline import block_contents, hit_blocks
from engine.vllm_versions import FREE_POLICY_NOTES, FREE_POLICY_VERSIONS
from teaching.lessons import flow
from teaching.lessons.loader import Lesson, LessonError, answer_question, load_lessons
from teaching.lessons.measure import measure_ttft, real_model_available
from teaching.scenarios.scenario import ScenarioRun, run_scenario
from ui.persist import copy_back, mirror
from ui.projector import projected_table, projector_on
from ui.state import CUSTOM, init_lab_state
from viz import legend_html
from viz.legend import POOL_STATES, TABLE_STATES
from viz.pool_html import POOL_CSS, block_grid_html, block_tables_html, free_queue_html
from viz.theme import STATE_COLORS

LESSONS_DIR = Path(os.environ.get("PREFIXLAB_LESSONS_DIR", Path(__file__).resolve().parent.parent / "lessons"))
PROSE_HEIGHT = 250  # px: the lesson's text scrolls in its own box, so the stepping starts on the first screen
CSS = f"""<style>
[data-testid=stMainBlockContainer]{{padding:2.2rem 1.5rem 2rem 1.5rem;max-width:1400px}}
.lesson-log{{border-left:5px solid {STATE_COLORS["computed"]};background:#f5f7fa;padding:8px 12px;border-radius:4px;
  overflow-wrap:anywhere}}
.lesson-log-head{{font-size:.9rem;color:#455a64;margin-bottom:2px}}.lesson-log ul{{margin:0;padding-left:1.1rem}}
.lesson-tag{{background:#263238;color:white;border-radius:3px;padding:0 5px;font-size:.75rem;margin-right:5px}}
.lesson-script{{font-family:monospace;font-size:.9rem;background:#f5f7fa;border-radius:4px;padding:6px 0;
  white-space:pre-wrap;overflow-wrap:anywhere;margin-bottom:8px}}
.lesson-script div{{padding:0 10px}}.lesson-script .now{{background:#fff3c4;font-weight:700}}
.lesson-script .next{{background:#e3f2fd}}.lesson-script .n{{color:#90a4ae;display:inline-block;width:2.2em}}
</style>"""
SCROLL_TOP = """<script>
for (const el of [document.querySelector('[data-testid="stMain"]'), document.scrollingElement]) { if (el) el.scrollTo(0, 0); }
</script>"""


# -- loading (cached by file times, so an edited lesson shows up on the next rerun) -----------------
def _stamp(folder: Path) -> tuple[tuple[str, float], ...]:
    return tuple((p.name, p.stat().st_mtime) for p in sorted(folder.glob("*.md")))


@st.cache_resource(show_spinner=False, max_entries=4)
def _load(folder: str, stamp: tuple) -> tuple[list[Lesson], list[LessonError]]:
    return load_lessons(folder)


# -- position: one per scenario line that does something --------------------------------------------------
def pos_key(lesson: Lesson) -> str:
    return f"lesson_pos_{lesson.slug}"


def set_line(lesson: Lesson, line_no: int) -> None:
    """Callback: move to just after ``line_no`` (0 = before the first line)."""
    st.session_state[pos_key(lesson)] = line_no


def current_position(lesson: Lesson) -> int:
    key = pos_key(lesson)
    if key not in st.session_state:  # first visit: a shared URL may name the line
        st.session_state[key] = flow.clamp_position(lesson, st.query_params.get("line"))
    st.session_state[key] = flow.clamp_position(lesson, st.session_state[key])
    return st.session_state[key]


def step_controls(lesson: Lesson, position: int) -> None:
    """← Back and Next → (the arrow keys too), a way back to the start, and where the student is."""
    key = pos_key(lesson)
    places = flow.positions(lesson)
    last = places[-1]
    c1, c2, c3, c4 = st.columns([1, 1.15, 1.3, 2.4], vertical_alignment="center")
    c1.button("Start", icon=":material/first_page:", key=f"{key}_start", on_click=set_line, args=(lesson, 0),
              disabled=position == 0, width="stretch", help="Back to before the first line")
    c2.button("Back", icon=":material/chevron_left:", key=f"{key}_back", on_click=set_line,
              args=(lesson, flow.step_from(lesson, position, -1)), disabled=position == 0, width="stretch",
              shortcut="Left", help="One line back (←)")
    c3.button("Next", icon=":material/chevron_right:", icon_position="right", key=f"{key}_next", type="primary",
              on_click=set_line, args=(lesson, flow.step_from(lesson, position, +1)), disabled=position == last,
              width="stretch", shortcut="Right", help="Play the next line (→)")
    c4.caption(f"Step {places.index(position)} of {len(places) - 1} · ← → keys step too")
    st.query_params["line"] = str(position)


# -- the scenario views -----------------------------------------------------------------------------------
def script_html(lesson: Lesson, position: int) -> str:
    """The scenario as the student reads it: the line just played marked, the next one tinted."""
    upcoming = flow.step_from(lesson, position, +1)
    rows = []
    for number, text in enumerate(flow.shown_scenario(lesson), start=1):
        cls = "now" if number == position else "next" if number == upcoming and upcoming != position else ""
        rows.append(f"<div class='{cls}'><span class='n'>{number}</span>{escape(text) or '&nbsp;'}</div>")
    return f"<div class='lesson-script'>{''.join(rows)}</div>"


def log_html(lesson: Lesson, run: ScenarioRun, position: int) -> str:
    if position == 0:
        return ("<div class='lesson-log'>Nothing has happened yet: every usable block is in the free queue. "
                "Press <b>Next</b> (or →) to play line "
                f"{flow.step_from(lesson, 0, +1)}.</div>")
    items = [f"<li><span class='lesson-tag'>{escape(i.tag)}</span>{escape(i.text)}</li>"
             for i in flow.what_happened(run, position)]
    note = flow.line_note(run, position)
    return (f"<div class='lesson-log'><div class='lesson-log-head'>Line {position}: "
            f"<code>{escape(flow.shown_line(lesson, position))}</code></div>"
            f"<ul>{''.join(items) or '<li>No change to the cache.</li>'}</ul>"
            + (f"<p><i>{escape(note)}</i></p>" if note else "") + "</div>")


def policy_views(run: ScenarioRun, position: int) -> None:
    """Block grid, free queue and block tables after ``position`` (blocks this line touched outlined)."""
    index = flow.state_index(run, position)
    snap = run.timeline().state_at(index).copy()
    touched = flow.touched_blocks(run, position)
    contents = block_contents(run.events)
    text = run.token_text
    st.html(POOL_CSS)  # HTML, not Plotly: the pictures arrive with the page instead of after Plotly.js loads
    st.html(block_grid_html(snap, touched=touched, contents=contents, token_text=text))
    st.html(free_queue_html(snap, touched=touched, contents=contents, token_text=text))
    st.html(block_tables_html(snap, touched=touched, hits=hit_blocks(run.events, index)))


def open_in_lab(lesson: Lesson, event_index: int) -> None:
    """Callback: hand the scenario to the lab page (its durable ``lab_*`` keys) at this moment."""
    init_lab_state()
    st.session_state.update(
        custom_text="\n".join(flow.shown_scenario(lesson)), lab_source=CUSTOM, lab_pos=event_index, lab_block=None, lab_hash=None,
        lab_predict=False, lab_compare=len(lesson.policies) > 1, lessons_go_lab=True,
    )
    if len(lesson.policies) == 1:
        st.session_state["cfg_policy"] = lesson.policies[0]


# -- questions, beside the picture at their moment ---------------------------------------------------------
def feedback_key(lesson: Lesson, question_id: str) -> str:
    return f"lesson_fb_{lesson.slug}_{question_id}"


def choice_key(lesson: Lesson, question_id: str) -> str:
    return f"lesson_choice_{lesson.slug}_{question_id}"


def check(lesson: Lesson, number: int) -> None:
    """Callback: compare the student's choice with the engine's answer."""
    question = lesson.questions[number - 1]
    answer = answer_question(lesson, question)
    st.session_state[feedback_key(lesson, question.id)] = flow.verdict_for(
        answer, st.session_state.get(choice_key(lesson, question.id)))


def choice_changed(lesson: Lesson, question_id: str) -> None:
    """Callback: keep the prediction (it outlives its widget), and drop a verdict it made stale.

    A revealed answer stays shown.
    """
    copy_back(choice_key(lesson, question_id))()
    if st.session_state.get(feedback_key(lesson, question_id)) != flow.REVEALED:
        st.session_state.pop(feedback_key(lesson, question_id), None)


def reveal(lesson: Lesson, number: int) -> None:
    """Callback: show the engine's answer and play the line it is about (the picture is right beside)."""
    question = lesson.questions[number - 1]
    st.session_state[feedback_key(lesson, question.id)] = flow.REVEALED
    set_line(lesson, question.after)


def question_card(lesson: Lesson, moment: flow.MomentQuestion) -> None:
    question = moment.question
    answer = answer_question(lesson, question)
    with st.container(border=True):
        st.markdown(f"**Q{moment.number}.** {question.ask}")
        st.caption(flow.question_prompt(lesson, moment))
        key = choice_key(lesson, question.id)
        if st.session_state.get(key) not in answer.options:
            st.session_state[key] = None
        st.radio("Your prediction", answer.options, key=mirror(key), horizontal=True,
                 on_change=choice_changed, args=(lesson, question.id))
        hint = flow.answer_hint(question)
        if hint:
            st.caption(hint)
        c1, c2 = st.columns(2)
        c1.button("Check", key=f"check_{lesson.slug}_{question.id}", on_click=check, args=(lesson, moment.number),
                  type="primary", width="stretch")
        c2.button("Reveal", key=f"reveal_{lesson.slug}_{question.id}", on_click=reveal, args=(lesson, moment.number),
                  width="stretch", help="Show the engine's answer and play the line it is about")
        if moment.phase == flow.LOOK:
            st.button("Go to the moment before", icon=":material/undo:", key=f"before_{lesson.slug}_{question.id}",
                      on_click=set_line, args=(lesson, flow.previous_line(lesson, question.after)), type="tertiary",
                      help="Step back to just before this line, to predict from the picture")
        verdict = st.session_state.get(feedback_key(lesson, question.id))
        text = flow.feedback(lesson, question, answer, verdict, st.session_state.get(choice_key(lesson, question.id)))
        show = {flow.EMPTY: st.warning, flow.RIGHT: st.success, flow.WRONG: st.error, flow.REVEALED: st.info}
        if verdict in show:
            show[verdict](text)
        if verdict in (flow.RIGHT, flow.REVEALED) and question.explain:
            st.markdown(f"*Why:* {question.explain}")


# -- the lesson -------------------------------------------------------------------------------------------
def scenario_section(lesson: Lesson) -> None:
    """Prose and the scenario text on top; below, the pictures beside the step controls and questions."""
    runs = {p: run_scenario(lesson.scenario, p) for p in lesson.policies}
    first = runs[lesson.policies[0]]
    position = current_position(lesson)
    projector = projector_on()
    if not projector:  # projected, the picture and Next come first and the text follows in the page
        prose_and_script(lesson, first, position, height=PROSE_HEIGHT)
        st.subheader("Step through it: the cache " + flow.position_label(lesson, position), divider="gray",
                     anchor="step")
    step_controls(lesson, position)
    pictures, side = st.columns([1.15, 1], gap="medium")
    with side:
        for moment in flow.questions_at(lesson, position):
            question_card(lesson, moment)
        st.markdown(log_html(lesson, first, position), unsafe_allow_html=True)
        asked = flow.moments_with_questions(lesson)
        later = [p for p in asked if p > position]
        if not flow.questions_at(lesson, position) and later:
            st.caption(f"Next question: after line {later[0]} (press → to get there).")
        st.button("Open in the lab, event by event", icon=":material/grid_view:", key=f"lab_{lesson.slug}",
                  on_click=open_in_lab, args=(lesson, flow.state_index(first, position)),
                  help="The eviction lab steps through every single event of this scenario, forwards and backwards")
    with pictures:
        st.markdown(legend_html(list(POOL_STATES) + list(TABLE_STATES), ("touched",)), unsafe_allow_html=True)
        st.caption("Blocks with a thick solid outline are the ones this line allocated or hit.")
        for policy, run in runs.items():
            if len(runs) > 1:
                st.markdown(f"**{FREE_POLICY_VERSIONS[policy]}** · {FREE_POLICY_NOTES[policy]}")
            policy_views(run, position)
    if projector:
        st.subheader("The lesson", divider="gray", anchor="text")
        prose_and_script(lesson, first, position, height="content")


def prose_and_script(lesson: Lesson, first: ScenarioRun, position: int, height: int | Literal["content"]) -> None:
    """The lesson's text beside its scenario; in a box of ``height`` px that scrolls, or in the page flow."""
    prose, script = st.columns([1.3, 1], gap="medium")
    with prose, st.container(height=height, border=False):
        st.markdown(flow.body_markdown(lesson.body))
    with script, st.container(height=height, border=False):
        st.markdown(f"**The scenario** · played on the simulator: {first.num_blocks} blocks (block 0 is reserved) × "
                    f"{first.block_size} tokens per block.")
        st.markdown(script_html(lesson, position), unsafe_allow_html=True)


# -- the real model (optional) ---------------------------------------------------------------------------
def measure_key(lesson: Lesson) -> str:
    return f"lesson_measure_{lesson.slug}"


def run_measurement(lesson: Lesson) -> None:
    """Callback: time the lesson's chats on the real model (cache on, then off)."""
    assert lesson.measure is not None
    try:
        from ui.model import session_backend, shared_model  # the server's one model; each engine gets its own pages

        st.session_state[measure_key(lesson)] = measure_ttft(lesson.measure, shared_model(), session_backend)
    except Exception as exc:
        st.session_state[measure_key(lesson)] = f"The real model could not run here: {exc}"


def measure_section(lesson: Lesson) -> None:
    """TTFT with the cache on and off, measured by the engine on the real model when it is installed."""
    spec = lesson.measure
    assert spec is not None
    st.subheader("On the real model", divider="gray")
    st.caption(f"{len(spec.questions)} chats share this system prompt ({spec.block_size}-token blocks, one at a "
               f"time, median of {spec.repeats} rounds): “{spec.system}”")
    if not real_model_available():
        st.info("This build has no model back end, so there is nothing to time here. The scenario above shows the same "
                "reuse in tokens; the Playground page runs the real model when it is installed.")
        return
    st.button("Measure on the real model", icon=":material/timer:", key=f"measure_{lesson.slug}",
              on_click=run_measurement, args=(lesson,))
    result = st.session_state.get(measure_key(lesson))
    if isinstance(result, str):
        st.warning(result)
    elif result:
        # The key columns first (speed-up beside the chat), so a narrow screen never hides them.
        projected_table(
            [{"chat": r.question, "speed-up": round(r.speedup, 2), "TTFT cache on (ms)": round(r.ttft_on_ms, 1),
              "TTFT cache off (ms)": round(r.ttft_off_ms, 1), "from the cache": r.cached_tokens,
              "computed": r.computed_tokens, "prompt tokens": r.prompt_tokens,
              "on: fastest-slowest": f"{r.on_range_ms[0]:.0f}-{r.on_range_ms[1]:.0f}",
              "off: fastest-slowest": f"{r.off_range_ms[0]:.0f}-{r.off_range_ms[1]:.0f}"} for r in result],
            hide_index=True,
        )
        st.caption("TTFT is the engine's reading from scheduling to the first token, the median of the rounds, with the "
                   "fastest and slowest round beside it. The first chat finds a cold cache; the others reuse the system "
                   "prompt's full blocks. The token columns are exact; the timings depend on the machine.")


# -- the page --------------------------------------------------------------------------------------------
def lesson_picker(lessons: list[Lesson]) -> Lesson:
    slugs = [lesson.slug for lesson in lessons]
    wanted = st.query_params.get("lesson")
    if "lessons_pick" not in st.session_state:
        st.session_state["lessons_pick"] = wanted if wanted in slugs else slugs[0]
    titles = {lesson.slug: f"{n}. {lesson.title}" for n, lesson in enumerate(lessons, start=1)}
    if st.session_state["lessons_pick"] not in slugs:  # a lesson file was removed or broke
        st.session_state["lessons_pick"] = slugs[0]
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
    st.markdown(CSS, unsafe_allow_html=True)
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
    lessons, errors = _load(str(LESSONS_DIR), _stamp(LESSONS_DIR))
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
    if not projector:
        st.header(lesson.title)
    if lesson.summary and not projector:
        st.caption(lesson.summary)
    if lesson is lessons[0] and current_position(lesson) == 0 and not projector:
        st.info("**New here?** Read a few lines, then press **Next** (or →) to play the scenario one line at a "
                "time and watch the blocks below. Questions appear beside the picture when it is their moment: "
                "predict, check, and the engine tells you why.", icon=":material/waving_hand:")
    scenario_section(lesson)
    if lesson.measure is not None:
        measure_section(lesson)
    number = [item.slug for item in lessons].index(lesson.slug)
    if number + 1 < len(lessons):
        st.button(f"Next lesson: {lessons[number + 1].title}", icon=":material/arrow_forward:",
                  key="lessons_next_lesson", on_click=go_to_lesson, args=(lessons[number + 1].slug,))


main()
