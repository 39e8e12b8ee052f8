"""Lessons: a guided course through prefix caching, each lesson a live scenario.

Thin page: :func:`teaching.lessons.load_lessons` reads and checks ``lessons/*.md``; the
scenario is played by the engine and drawn with the lab's figure builders (``viz``); each
question is answered by the engine (:func:`teaching.lessons.answer_question`), never by the
lesson file. Set ``PREFIXLAB_LESSONS_DIR`` to read lessons from another folder.
"""

from __future__ import annotations

import os
import re
from html import escape
from pathlib import Path

import streamlit as st

from engine.config import EngineConfig
from engine.events import BlocksAllocated, BlocksTouched
from engine.timeline import block_contents, hit_blocks
from teaching.describe import EVENT_TAGS, describe_event
from teaching.lesson_measure import measure_ttft, real_model_available
from teaching.lessons import Answer, Lesson, LessonError, Question, answer_question, load_lessons
from teaching.scenario import ScenarioRun, run_scenario
from ui.persist import copy_back, mirror
from ui.state import CUSTOM, init_lab_state
from viz import (
    block_grid,
    block_tables_figure,
    free_queue_figure,
    legend_html,
)
from viz.legend import POOL_STATES, TABLE_STATES

LESSONS_DIR = Path(os.environ.get("PREFIXLAB_LESSONS_DIR", Path(__file__).resolve().parent.parent / "lessons"))
PLOT_CONFIG = {"displayModeBar": False, "staticPlot": False}
POLICY_NOTES = {
    "vllm": "vLLM ≥ 0.24: hashless blocks → head, hashed → tail",
    "classic": "vLLM ≤ 0.23: every freed block → tail",
}
#: Events that make the step log too chatty for a beginner.
QUIET_KINDS = {"token", "step", "schedule"}


# -- loading (cached by file times, so an edited lesson shows up on the next rerun) -----------------
# Scenarios and answers are not cached: the simulator plays a lesson in milliseconds.
def _stamp(folder: Path) -> tuple[tuple[str, float], ...]:
    return tuple((p.name, p.stat().st_mtime) for p in sorted(folder.glob("*.md")))


@st.cache_resource(show_spinner=False, max_entries=4)
def _load(folder: str, stamp: tuple) -> tuple[list[Lesson], list[LessonError]]:
    return load_lessons(folder)




# -- step control: one position per scenario line that does something --------------------------------
def pos_key(lesson: Lesson) -> str:
    return f"lesson_pos_{lesson.slug}"


def set_line(lesson: Lesson, line_no: int) -> None:
    """Callback: move the step control to just after ``line_no`` (0 = before the first line)."""
    st.session_state[pos_key(lesson)] = line_no


def line_label(lesson: Lesson, line_no: int) -> str:
    return "start (nothing played yet)" if line_no == 0 else f"after line {line_no}: {lesson.scenario_line(line_no)}"


def previous_line(lesson: Lesson, line_no: int) -> int:
    earlier = [n for n in lesson.action_lines if n < line_no]
    return earlier[-1] if earlier else 0


def step_controls(lesson: Lesson) -> int:
    """Back / Next buttons and a slider over the scenario's lines; returns the chosen line.

    The position lives under a durable key mirrored into the widget (the lab's
    :mod:`ui.persist` pattern), so it survives a visit to another page.
    """
    positions = [0, *lesson.action_lines]
    key = pos_key(lesson)
    if key not in st.session_state:  # first visit: a shared URL may name the line
        wanted = st.query_params.get("line", "0")
        st.session_state[key] = int(wanted) if wanted.isdigit() else 0
    if st.session_state[key] not in positions:
        st.session_state[key] = 0
    current = st.session_state[key]
    index = positions.index(current)
    c1, c2, c3 = st.columns([1, 1, 1.3])  # text-only Start/Back: with icons they spill on a 1024 px screen
    c1.button("« Start", key=f"{key}_start", on_click=set_line, args=(lesson, 0),
              disabled=index == 0, width="stretch")
    c2.button("‹ Back", key=f"{key}_back", on_click=set_line,
              args=(lesson, positions[max(0, index - 1)]), disabled=index == 0, width="stretch")
    c3.button("Next line", icon=":material/chevron_right:", key=f"{key}_next", on_click=set_line, type="primary",
              args=(lesson, positions[min(len(positions) - 1, index + 1)]), disabled=index == len(positions) - 1,
              width="stretch")
    st.select_slider("Scenario position", positions, key=mirror(key), on_change=copy_back(key),
                     format_func=lambda n: "start" if n == 0 else f"line {n}")
    st.query_params["line"] = str(st.session_state[key])
    return st.session_state[key]


# -- the scenario views ---------------------------------------------------------------------------------
def line_events(run: ScenarioRun, line_no: int):
    span = next((s for s in run.spans if s.action.line_no == line_no), None)
    return (span, run.events[span.start : span.end]) if span else (None, [])


def state_index(run: ScenarioRun, line_no: int) -> int:
    """How many events have happened once ``line_no`` has been played."""
    span, _ = line_events(run, line_no)
    return span.end if span else 0


def what_happened(lesson: Lesson, run: ScenarioRun, line_no: int) -> None:
    """The chosen line's events in plain words (the lab's ``describe_event``)."""
    if line_no == 0:
        st.info("Nothing has happened yet: every usable block is in the free queue. Press **Next line**.")
        return
    span, events = line_events(run, line_no)
    contents = block_contents(run.events)
    items = [
        f"<li><b>{EVENT_TAGS.get(e.kind, e.kind.upper())}</b> {escape(describe_event(e, run.token_text, contents))}</li>"
        for e in events
        if e.kind not in QUIET_KINDS
    ]
    note = f"<p><i>{escape(span.note)}</i></p>" if span and span.note else ""
    st.markdown(
        f"<div class='lesson-log'><div class='lesson-log-head'>Line {line_no}: <code>{escape(lesson.scenario_line(line_no))}</code></div>"
        f"<ul>{''.join(items) or '<li>No change to the cache.</li>'}</ul>{note}</div>",
        unsafe_allow_html=True,
    )


def policy_views(lesson: Lesson, run: ScenarioRun, line_no: int, policy: str, narrow: bool) -> None:
    """Block grid, free queue and block tables after ``line_no`` (blocks this line touched outlined)."""
    index = state_index(run, line_no)
    snap = run.timeline().state_at(index).copy()
    _, events = line_events(run, line_no)
    touched = {b for e in events if isinstance(e, (BlocksAllocated, BlocksTouched)) for b in e.block_ids}
    contents = block_contents(run.events)
    text = run.token_text
    prefix = f"{lesson.slug}_{policy}"
    st.plotly_chart(block_grid(snap, touched=touched, contents=contents, token_text=text), key=f"{prefix}_grid", config=PLOT_CONFIG)
    st.plotly_chart(free_queue_figure(snap, touched=touched, contents=contents, token_text=text, per_row=6 if narrow else 10),
                    key=f"{prefix}_queue", config=PLOT_CONFIG)
    st.plotly_chart(block_tables_figure(snap, touched=touched, hits=hit_blocks(run.events, index)), key=f"{prefix}_tables",
                    config=PLOT_CONFIG)


def body_markdown(body: str) -> str:
    """Lesson sections (``##``) render as small headings under the lesson's own title."""
    return re.sub(r"^(#{1,3}) ", lambda m: "#" * (len(m.group(1)) + 2) + " ", body, flags=re.MULTILINE)


def open_in_lab(lesson: Lesson, event_index: int) -> None:
    """Callback: hand the scenario to the lab page (its durable ``lab_*`` keys) at this moment."""
    init_lab_state()
    st.session_state.update(
        custom_text=lesson.scenario_text, lab_source=CUSTOM, lab_pos=event_index, lab_block=None, lab_hash=None,
        lab_q=None, lab_predict=False, lab_playing=False, lab_compare=len(lesson.policies) > 1, lessons_go_lab=True,
    )
    if len(lesson.policies) == 1:
        st.session_state["cfg_policy"] = lesson.policies[0]


def scenario_section(lesson: Lesson) -> None:
    """Prose on the left; the scenario, its step control and what the line did on the right; views below."""
    runs = {p: run_scenario(lesson.scenario, p) for p in lesson.policies}
    prose, player = st.columns([1, 1.1], gap="large")
    with prose:
        st.markdown(body_markdown(lesson.body))
    with player:
        st.markdown("##### The scenario")
        st.caption(f"Played on the simulator: {runs[lesson.policies[0]].num_blocks} blocks "
                   f"(block 0 is reserved) × {runs[lesson.policies[0]].block_size} tokens. "
                   "Questions refer to these line numbers.")
        st.code(lesson.scenario_text.rstrip(), language=None, line_numbers=True, wrap_lines=True)
        line_no = step_controls(lesson)
        what_happened(lesson, runs[lesson.policies[0]], line_no)
        st.button("Open in the lab, event by event", icon=":material/grid_view:", key=f"lab_{lesson.slug}",
                  on_click=open_in_lab, args=(lesson, state_index(runs[lesson.policies[0]], line_no)),
                  help="The eviction lab steps through every single event of this scenario, forwards and backwards")
    st.markdown("##### The cache " + ("before the first line" if line_no == 0 else f"after line {line_no}"))
    st.markdown(legend_html(list(POOL_STATES) + list(TABLE_STATES), ("touched",)), unsafe_allow_html=True)
    st.caption("Blocks with a thick solid outline are the ones this line allocated or hit.")
    columns = st.columns(len(runs), gap="medium") if len(runs) > 1 else [st.container()]
    for column, (policy, run) in zip(columns, runs.items()):
        with column:
            if len(runs) > 1:
                st.markdown(f"**{policy}** · {POLICY_NOTES[policy]}")
            policy_views(lesson, run, line_no, policy, narrow=len(runs) > 1)


# -- the real model (optional) ---------------------------------------------------------------------------
@st.cache_resource(show_spinner="Loading the real model (once per server)…")
def real_backend():
    from engine.model import ModelBackend

    return ModelBackend(EngineConfig(backend="model"))


def measure_key(lesson: Lesson) -> str:
    return f"lesson_measure_{lesson.slug}"


def run_measurement(lesson: Lesson) -> None:
    """Callback: time the lesson's chats on the real model (cache on, then off)."""
    try:
        st.session_state[measure_key(lesson)] = measure_ttft(lesson.measure, real_backend())
    except Exception as exc:
        st.session_state[measure_key(lesson)] = f"The real model could not run here: {exc}"


def measure_section(lesson: Lesson) -> None:
    """TTFT with the cache on and off, measured by the engine on the real model when it is installed."""
    spec = lesson.measure
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
        st.dataframe(
            [{"chat": r.question, "prompt tokens": r.prompt_tokens, "from the cache": r.cached_tokens,
              "computed": r.computed_tokens, "TTFT cache on (ms)": round(r.ttft_on_ms, 1), "TTFT cache off (ms)": round(r.ttft_off_ms, 1),
              "speed-up": round(r.speedup, 2)} for r in result],
            hide_index=True,
        )
        st.caption("The first chat finds a cold cache; the others reuse the system prompt's full blocks. The token "
                   "columns are exact; the timings depend on the machine and are noisy on a busy CPU.")


# -- questions -------------------------------------------------------------------------------------------
def feedback_key(lesson: Lesson, question: Question) -> str:
    return f"lesson_fb_{lesson.slug}_{question.id}"


def choice_key(lesson: Lesson, question: Question) -> str:
    return f"lesson_choice_{lesson.slug}_{question.id}"


def check(lesson: Lesson, question: Question, answer: Answer) -> None:
    """Callback: compare the student's choice with the engine's answer."""
    choice = st.session_state.get(choice_key(lesson, question))
    if choice is None:
        verdict = "empty"
    else:
        verdict = "right" if answer.is_correct(choice) else "wrong"
    st.session_state[feedback_key(lesson, question)] = verdict


def choice_changed(lesson: Lesson, question: Question) -> None:
    """Callback: a new prediction makes an old verdict stale (a revealed answer stays shown)."""
    if st.session_state.get(feedback_key(lesson, question)) != "revealed":
        st.session_state.pop(feedback_key(lesson, question), None)


def reveal(lesson: Lesson, question: Question) -> None:
    """Callback: show the engine's answer and move the scenario to the moment it is about."""
    st.session_state[feedback_key(lesson, question)] = "revealed"
    set_line(lesson, question.after)


def question_card(lesson: Lesson, number: int, question: Question) -> None:
    answer = answer_question(lesson, question)
    with st.container(border=True):
        policy = f" · under the **{question.policy}** rule" if len(lesson.policies) > 1 else ""
        st.markdown(f"**Q{number}.** {question.ask}")
        st.caption(f"About line {question.after}: `{lesson.scenario_line(question.after)}`{policy}")
        st.radio("Your prediction", answer.options, index=None, key=choice_key(lesson, question), horizontal=True,
                 on_change=choice_changed, args=(lesson, question))
        c1, c2, c3 = st.columns([1, 1, 2.2])
        c1.button("Check", key=f"check_{lesson.slug}_{question.id}", on_click=check, args=(lesson, question, answer),
                  type="primary", width="stretch")
        c2.button("Reveal", key=f"reveal_{lesson.slug}_{question.id}", on_click=reveal, args=(lesson, question),
                  width="stretch")
        c3.button("Go to the moment before", icon=":material/undo:", key=f"before_{lesson.slug}_{question.id}",
                  on_click=set_line, args=(lesson, previous_line(lesson, question.after)),
                  help="Step the scenario to just before this line, to predict from the picture")
        verdict = st.session_state.get(feedback_key(lesson, question))
        engine_says = (f"The engine says **{answer.text}** (`{question.answer}` after line {question.after}"
                       f"{', ' + question.policy + ' rule' if len(lesson.policies) > 1 else ''}).")
        if verdict == "empty":
            st.warning("Pick an answer first, then press Check.")
        elif verdict == "right":
            st.success(f"Right! {engine_says}")
        elif verdict == "wrong":
            choice = st.session_state.get(choice_key(lesson, question))
            st.error(f"Not quite: the engine does not say **{choice}**. Step the scenario to line {question.after} "
                     "and look again, or press Reveal.")
        elif verdict == "revealed":
            st.info(f"{engine_says} The scenario above now shows the moment after line {question.after}.")
        if verdict in ("right", "revealed") and question.explain:
            st.markdown(f"*Why:* {question.explain}")


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
                        format_func=titles.__getitem__)
    if st.query_params.get("lesson") != slug:
        st.query_params.pop("line", None)  # a line number belongs to the lesson it was shared with
    st.query_params["lesson"] = slug
    return lessons[slugs.index(slug)]


def main() -> None:
    st.markdown(
        "<style>.lesson-log{border-left:5px solid #1565c0;background:#f5f7fa;padding:8px 12px;border-radius:4px}"
        ".lesson-log-head{font-size:.9rem;color:#455a64;margin-bottom:2px}.lesson-log ul{margin:0;padding-left:1.1rem}"
        "</style>",
        unsafe_allow_html=True,
    )
    if st.session_state.pop("lessons_go_lab", False):
        st.switch_page("app_pages/lab.py")
    st.title("Lessons")
    st.sidebar.caption("Lessons play each scenario with the settings written in the lesson, so that its questions "
                       "keep their answers; the engine settings above apply to the lab.")
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
    lesson = lesson_picker(lessons)
    st.header(lesson.title)
    if lesson.summary:
        st.caption(lesson.summary)
    scenario_section(lesson)
    if lesson.measure is not None:
        measure_section(lesson)
    if lesson.questions:
        st.subheader("Predict, then check", divider="gray")
        st.caption("Every answer below is computed by running the scenario on the engine, not written in the lesson.")
        for number, question in enumerate(lesson.questions, start=1):
            question_card(lesson, number, question)
    number = [lesson.slug for lesson in lessons].index(lesson.slug)
    if number + 1 < len(lessons):
        st.button(f"Next lesson: {lessons[number + 1].title}", icon=":material/arrow_forward:",
                  on_click=lambda: st.session_state.update(lessons_pick=lessons[number + 1].slug))


main()
