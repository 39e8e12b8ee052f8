"""The Lessons page's widgets: the step buttons, the script and log, the questions, the real-model timing.

The page (``app_pages/lessons.py``) lays these out; the state they show is a
:class:`teaching.pages.lessons.LessonSession`, and every answer comes from the engine.
"""

from __future__ import annotations

from html import escape

import streamlit as st

from engine.vllm_versions import FREE_POLICY_NOTES, FREE_POLICY_VERSIONS
from teaching.lessons import flow
from teaching.lessons.loader import Lesson, answer_question
from teaching.lessons.measure import measure_ttft, real_model_available
from teaching.pages.lessons import LessonSession
from ui.lab_player import PlayerArgs, player, timeline_id
from ui.persist import copy_back, mirror
from ui.projector import projected_table
from ui.state import CUSTOM, init_lab_state


# -- position: one per scenario line that does something --------------------------------------------------
def pos_key(lesson: Lesson) -> str:
    return f"lesson_pos_{lesson.slug}"


def set_line(lesson: Lesson, line_no: int) -> None:
    """Callback: move to just after ``line_no`` (0 = before the first line)."""
    st.session_state[pos_key(lesson)] = line_no


def step_controls(session: LessonSession) -> None:
    """Start, Back and Next (the arrow keys too), and where the student is."""
    lesson, position = session.lesson, session.position
    key = pos_key(lesson)
    c1, c2, c3, c4 = st.columns([1, 1.15, 1.3, 2.4], vertical_alignment="center")
    c1.button("Start", icon=":material/first_page:", key=f"{key}_start", on_click=set_line, args=(lesson, 0),
              disabled=position == 0, width="stretch", help="Back to before the first line")
    c2.button("Back", icon=":material/chevron_left:", key=f"{key}_back", on_click=set_line,
              args=(lesson, session.step_to(-1)), disabled=position == 0, width="stretch",
              shortcut="Left", help="One line back (←)")
    c3.button("Next", icon=":material/chevron_right:", icon_position="right", key=f"{key}_next", type="primary",
              on_click=set_line, args=(lesson, session.step_to(+1)), disabled=position == session.places[-1],
              width="stretch", shortcut="Right", help="Play the next line (→)")
    c4.caption(f"{session.step_label} · ← → keys step too")
    st.query_params["line"] = str(position)


# -- the scenario views -----------------------------------------------------------------------------------
def script_html(session: LessonSession) -> str:
    """The scenario as the student reads it: the line just played marked, the next one tinted."""
    rows = [f"<div class='{row.mark}'><span class='n'>{row.number}</span>{escape(row.text) or '&nbsp;'}</div>"
            for row in session.script()]
    return f"<div class='lesson-script'>{''.join(rows)}</div>"


def log_html(session: LessonSession) -> str:
    lesson, position = session.lesson, session.position
    if position == 0:
        return ("<div class='lesson-log'>Nothing has happened yet: every usable block is in the free queue. "
                f"Press <b>Next</b> (or →) to play line {session.step_to(+1)}.</div>")
    items = [f"<li><span class='lesson-tag'>{escape(i.tag)}</span>{escape(i.text)}</li>" for i in session.happened()]
    note = session.note
    return (f"<div class='lesson-log'><div class='lesson-log-head'>Line {position}: "
            f"<code>{escape(flow.shown_line(lesson, position))}</code></div>"
            f"<ul>{''.join(items) or '<li>No change to the cache.</li>'}</ul>"
            + (f"<p><i>{escape(note)}</i></p>" if note else "") + "</div>")


def pictures(session: LessonSession, projector: bool) -> None:
    """Each policy's pool, free queue, block tables and hash table, drawn by the player at this line."""
    for view in session.views():
        if len(session.runs) > 1:
            st.markdown(f"**{FREE_POLICY_VERSIONS[view.policy]}** · {FREE_POLICY_NOTES[view.policy]}")
        player(PlayerArgs(data=view.data, data_id=timeline_id(session.lesson.slug, session.lesson.scenario_text, view.policy),
                          step=view.step, mode="view", touched=view.touched, projector=projector),
               key=f"lesson_player_{session.lesson.slug}_{view.policy}")


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
