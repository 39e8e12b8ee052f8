"""Block pool & eviction lab: step through a scenario's event log and watch the cache.

Thin page: read widgets, take both policies' runs from the session (played once), ask
the timeline for the state at the chosen event, draw the viz figures.
"""

from __future__ import annotations

from html import escape

import streamlit as st

from engine.timeline import hit_blocks
from teaching.describe import EVENT_TAGS, describe_event
from teaching.lab import (
    JUMPS,
    EvictionQuestion,
    LabRuns,
    align_index,
    clamp,
    engine_step_at,
    log_window,
    next_eviction_question,
)
from teaching.scenario import ScenarioError, ScenarioRun
from teaching.scenario_library import builtin_titles
from ui.persist import copy_back, mirror
from ui.settings import LabSettings, current_settings
from ui.state import CUSTOM, get_runs, init_lab_state, scenario_text, write_url
from ui.style import LAB_CSS
from ui.text import plain_md
from viz import (
    block_grid,
    block_tables_figure,
    free_queue_figure,
    hash_table_figure,
    legend_html,
)
from viz.legend import POOL_STATES, TABLE_STATES

PLOT_CONFIG = {"displayModeBar": False}
SPEEDS = (1.0, 2.0, 4.0)  # events per second
POLICY_NOTES = {
    "vllm": "hashless blocks → head, hashed → tail",
    "classic": "every freed block → tail",
}


# -- callbacks (run before the script, so they may set any state) -------------------------------------
def set_pos(pos: int) -> None:
    st.session_state["lab_pos"] = pos


def on_source_change() -> None:
    st.session_state["lab_source"] = st.session_state["_w_lab_source"]
    st.session_state.update(lab_pos=0, lab_block=None, lab_hash=None, lab_q=None, lab_playing=False)


def toggle_play() -> None:
    st.session_state["lab_playing"] = not st.session_state["lab_playing"]


def on_predict_change(run: ScenarioRun) -> None:
    st.session_state["lab_predict"] = st.session_state["_w_lab_predict"]
    st.session_state["lab_playing"] = False
    if st.session_state["lab_predict"]:
        ask(next_eviction_question(run, st.session_state["lab_pos"]))


def ask(question: EvictionQuestion | None) -> None:
    st.session_state.update(lab_q=question, lab_revealed=False)
    st.session_state.pop("_w_lab_guess", None)
    if question is not None:
        st.session_state["lab_pos"] = question.ask_at


def reveal(question: EvictionQuestion) -> None:
    st.session_state.update(lab_revealed=True, lab_pos=question.reveal_at)


def select_from_chart(chart_key: str, column: int) -> None:
    """A click on a tile selects its block in every view."""
    points = st.session_state[chart_key].selection.get("points", [])
    if points and points[0].get("customdata") is not None:
        st.session_state["lab_block"] = int(points[0]["customdata"][column])
        st.session_state["lab_hash"] = None


# -- pieces ---------------------------------------------------------------------------------------------
def event_card(run: ScenarioRun, contents: dict, pos: int) -> None:
    """The current event in words, with where it came from in the scenario."""
    n = len(run.events)
    span = run.span_at(pos)
    where = f"after line {span.action.line_no}: <code>{escape(span.action.source)}</code>" if span else "before the first line"
    head = f"Event {pos} of {n} · engine step {engine_step_at(run.events, pos)} · {where}"
    if pos == 0:
        body = "Nothing has happened yet: every usable block is free. Press ▶ (or the → key) to apply the first event."
        tag = "START"
    else:
        event = run.events[pos - 1]
        body = describe_event(event, run.token_text, contents)
        tag = EVENT_TAGS.get(event.kind, event.kind.upper())
    note = f"<br><i>Note: {escape(span.note)}</i>" if span and span.note and span.end == pos else ""
    st.markdown(
        f"<div class='lab-card'><div class='lab-card-head'>{head}</div>"
        f"<span class='lab-tag'>{tag}</span> {plain_md(body)}{note}</div>",
        unsafe_allow_html=True,
    )


def event_log(run: ScenarioRun, contents: dict, pos: int) -> None:
    lines = log_window(run, pos, lambda e: describe_event(e, run.token_text, contents), before=8, after=3)
    items = []
    for line in lines:
        style = "font-weight:600;background:#fff8e1" if line.current else ("color:#9e9e9e" if line.future else "")
        tag = EVENT_TAGS.get(line.kind, line.kind)
        items.append(f"<li style='{style}'><code>{line.index:>3}</code> <b>{tag}</b> {plain_md(line.text)}</li>")
    st.markdown("<ul class='lab-log'>" + "".join(items) + "</ul>", unsafe_allow_html=True)


def highlight_for(run: ScenarioRun, snapshot_hashes: dict) -> set[int]:
    chosen: set[int] = set()
    if st.session_state.get("lab_block") is not None:
        chosen.add(st.session_state["lab_block"])
    wanted = st.session_state.get("lab_hash")
    if wanted:
        for block_hash, ids in snapshot_hashes.items():
            if block_hash.hex() == wanted:
                chosen.update(ids)
    return chosen


def policy_views(run: ScenarioRun, contents: dict, pos: int, prefix: str, stacked: bool) -> None:
    """Block grid, free queue, block tables and hash table of one run at ``pos``."""
    snap = run.timeline().state_at(pos)  # the timeline's cursor: use it before the next state_at
    highlight = highlight_for(run, snap.hash_table)
    text = run.token_text
    grid = block_grid(snap, highlight, contents=contents, token_text=text)
    queue = free_queue_figure(snap, highlight, contents=contents, token_text=text, per_row=6 if stacked else 14)
    tables = block_tables_figure(snap, highlight, hits=hit_blocks(run.events, pos))
    hashes = hash_table_figure(snap, highlight, contents=contents, token_text=text)
    used = snap.num_blocks - 1 - len(snap.free_queue)
    st.markdown(
        f"<div class='lab-status'>in use <b>{used}</b> / {snap.num_blocks - 1} blocks · free queue <b>{len(snap.free_queue)}</b>"
        f" · cached hashes <b>{len(snap.hash_table)}</b> · evictions so far <b>{snap.num_evictions}</b></div>",
        unsafe_allow_html=True,
    )
    if stacked:
        places = [st.container()] * 4
    else:
        left, right = st.columns([1, 1], gap="medium")
        places = [left, st.container(), right, right]
    with places[0]:
        st.plotly_chart(grid, key=f"{prefix}_grid", on_select=lambda: select_from_chart(f"{prefix}_grid", 0),
                        selection_mode="points", config=PLOT_CONFIG)
    with places[2]:
        st.plotly_chart(tables, key=f"{prefix}_tables", config=PLOT_CONFIG)
    with places[3]:
        st.plotly_chart(hashes, key=f"{prefix}_hashes", config=PLOT_CONFIG)
    with places[1]:
        st.plotly_chart(queue, key=f"{prefix}_queue", on_select=lambda: select_from_chart(f"{prefix}_queue", 0),
                        selection_mode="points", config=PLOT_CONFIG)


def nav_row(run: ScenarioRun, pos: int) -> None:
    n = len(run.events)
    timeline = run.timeline()
    cols = st.columns([0.8, 1.1, 1.45, 0.8, 1.3, 0.85, 1.5])
    cols[0].button("", icon=":material/first_page:", key="nav_start", help="Back to the start",
                   on_click=set_pos, args=(0,), disabled=pos == 0, shortcut="Home", width="stretch")
    cols[1].button("Back", icon=":material/chevron_left:", key="nav_back", help="One event back",
                   on_click=set_pos, args=(pos - 1,), disabled=pos == 0, shortcut="Left", width="stretch")
    cols[2].button("Forward", icon=":material/chevron_right:", key="nav_forward", help="One event forward",
                   on_click=set_pos, args=(pos + 1,), disabled=pos >= n, shortcut="Right", width="stretch",
                   type="primary")
    cols[3].button("", icon=":material/last_page:", key="nav_end", help="To the last event",
                   on_click=set_pos, args=(n,), disabled=pos >= n, shortcut="End", width="stretch")
    labels = {"eviction": "Eviction", "hit": "Hit", "preemption": "Preemption"}
    for col, (name, kinds) in zip(cols[4:], JUMPS.items()):
        target = timeline.find_next(pos, kinds)
        col.button(labels[name], icon=":material/skip_next:", key=f"nav_next_{name}", on_click=set_pos,
                   args=(target or pos,),
                   disabled=target is None, width="stretch",
                   help=f"Jump to just after the next {name}" if target else f"No {name} ahead")
    st.slider("Event", 0, n, key=mirror("lab_pos"), on_change=copy_back("lab_pos"), label_visibility="collapsed")


def predict_panel(run: ScenarioRun, contents: dict) -> None:
    """Predict-the-victim mode: ask before an evicting allocation, then reveal the engine's answer."""
    question: EvictionQuestion | None = st.session_state.get("lab_q")
    if question is None:
        first = next_eviction_question(run, 0)
        c1, c2 = st.columns([3, 1], vertical_alignment="center")
        c1.info("No allocation ahead of this point evicts a cached block."
                + ("" if first else " This trace never evicts under this policy: try *Eviction pressure*, or the "
                   "*classic* policy."))
        if first is not None:
            c2.button("Ask from the start", key="predict_restart", on_click=ask, args=(first,), width="stretch")
        return
    queue = list(run.timeline().state_at(question.ask_at).free_queue)
    st.markdown(
        f"**Predict the victim.** {question.request_id} is about to take **{question.num_new_blocks} new "
        f"block{'s' if question.num_new_blocks != 1 else ''}** from the head of the free queue. "
        "Which block will be the first to lose its cached contents?"
    )
    revealed = st.session_state.get("lab_revealed", False)
    c1, c2 = st.columns([3, 2])
    guess = c1.pills("Your guess (a block in the free queue)", queue, key="_w_lab_guess", disabled=revealed)
    if not revealed:
        c2.button("Reveal", key="predict_reveal", type="primary", on_click=reveal, args=(question,),
                  disabled=guess is None, width="stretch")
        return
    taken = ", ".join(str(b) for b in question.allocated)
    later = [str(b) for b in question.evicted[1:]]
    why = (f"The allocation popped {taken} from the head. Blocks without a hash are reused silently; "
           f"the first one still holding a hash is evicted: block {question.answer}"
           + (f" (then {', '.join(later)})." if later else "."))
    if guess == question.answer:
        st.success(f"Right! Block {question.answer} is evicted. {why}")
    else:
        st.error(f"Not quite: you picked {guess}, but block {question.answer} is evicted. {why}")
    c2.button("Next question", key="predict_next", on_click=lambda: ask(next_eviction_question(run, question.reveal_at)),
              width="stretch")


def highlight_pickers(run: ScenarioRun, contents: dict, pos: int) -> None:
    snap = run.timeline().state_at(pos)
    block_ids = [None, *range(1, snap.num_blocks)]
    hashes = [None, *(h.hex() for h in snap.hash_table)]
    if st.session_state.get("lab_hash") not in hashes:
        st.session_state["lab_hash"] = None
    labels = {h.hex(): f"{h.hex()[:8]} · {' '.join(run.token_text(t) for t in contents.get(h, []))}" for h in snap.hash_table}
    c0, c1, c2 = st.columns([3.2, 1, 1.2], vertical_alignment="center")
    c0.markdown(legend_html(POOL_STATES) + legend_html(TABLE_STATES), unsafe_allow_html=True)
    c1.selectbox("Highlight a block", block_ids, label_visibility="collapsed", placeholder="Highlight a block…",
                 key=mirror("lab_block"), on_change=copy_back("lab_block"),
                 format_func=lambda b: "Highlight a block…" if b is None else f"block {b}",
                 help="Or click a tile. The block is outlined in every view.")
    c2.selectbox("…or a hash", hashes, label_visibility="collapsed", placeholder="…or a hash",
                 key=mirror("lab_hash"), on_change=copy_back("lab_hash"),
                 format_func=lambda h: "…or a hash" if h is None else "hash " + labels.get(h, h[:8]),
                 help="Outlines every block holding this hash (duplicates too), in both policies.")


# -- the page -----------------------------------------------------------------------------------------
def lab_views(runs: LabRuns, settings: LabSettings) -> None:
    """Everything that depends on the position. Runs as a fragment: a step redraws only this."""
    primary = runs.runs[settings.free_policy]
    n = len(primary.events)
    pos = clamp(st.session_state["lab_pos"], primary)
    if st.session_state["lab_playing"]:
        if pos >= n:
            st.session_state["lab_playing"] = False
            st.rerun()
        pos += 1
    st.session_state["lab_pos"] = pos
    contents = runs.contents[settings.free_policy]
    predicting = st.session_state["lab_predict"]
    if predicting:
        predict_panel(primary, contents)
        pos = st.session_state["lab_pos"]
    else:
        nav_row(primary, pos)
    if st.session_state["lab_compare"] and not predicting:
        other = runs.runs[settings.other_policy]
        other_pos = align_index(primary, other, pos)
        highlight_pickers(primary, contents, pos)
        columns = st.columns(2, gap="large")
        for col, run, at in ((columns[0], primary, pos), (columns[1], other, other_pos)):
            with col:
                note = POLICY_NOTES[run.free_policy]
                st.markdown(f"#### {run.free_policy}\n<span class='lab-status'>{note}</span>", unsafe_allow_html=True)
                event_card(run, runs.contents[run.free_policy], at)
                policy_views(run, runs.contents[run.free_policy], at, prefix=run.free_policy, stacked=True)
    else:
        event_card(primary, contents, pos)
        highlight_pickers(primary, contents, pos)
        policy_views(primary, contents, pos, prefix="main", stacked=False)
    with st.expander("Event log", expanded=not st.session_state["lab_compare"]):
        event_log(primary, contents, pos)
    write_url(settings)


def main() -> None:
    init_lab_state()
    settings = current_settings()
    st.markdown(LAB_CSS, unsafe_allow_html=True)
    titles = builtin_titles()
    options = list(titles) + ([CUSTOM] if st.session_state["custom_text"] else [])
    if st.session_state["lab_source"] not in options:
        st.session_state["lab_source"] = options[0]
    c0, c1, c2 = st.columns([2.4, 2.3, 1.2], vertical_alignment="center")
    c0.markdown("<div class='lab-title'>Block pool &amp; eviction lab</div>", unsafe_allow_html=True)
    c1.selectbox("Scenario", options, key=mirror("lab_source"), on_change=on_source_change,
                 label_visibility="collapsed", format_func=lambda k: "Your scenario (from the editor)" if k == CUSTOM else titles[k])
    c2.page_link("app_pages/scenario_editor.py", label="Write a scenario", icon=":material/edit_note:")
    try:
        runs = get_runs(scenario_text(st.session_state["lab_source"]), settings)
    except ScenarioError as exc:
        st.error(f"This scenario cannot be played with the current settings. {plain_md(str(exc))}")
        st.caption("Change the sidebar settings (empty = the scenario's own) or fix the scenario in the editor.")
        return
    primary = runs.runs[settings.free_policy]
    scenario = primary.scenario
    t0, t1, t2, t3, t4 = st.columns([2.2, 1.5, 1.6, 1.05, 0.9], vertical_alignment="center")
    with t0.popover(f"About · {primary.num_blocks} blocks × {primary.block_size} tokens", icon=":material/info:",
                    width="stretch"):
        if scenario.description:
            st.markdown(plain_md(scenario.description))
        st.code(scenario.text, language=None, line_numbers=True)
    t1.toggle("vLLM vs classic", key=mirror("lab_compare"), on_change=copy_back("lab_compare"))
    t2.toggle("Predict the victim", key=mirror("lab_predict"), on_change=on_predict_change, args=(primary,))
    playing = st.session_state["lab_playing"]
    t3.button("Pause" if playing else "Play", icon=":material/pause:" if playing else ":material/play_arrow:",
              key="play", on_click=toggle_play, disabled=st.session_state["lab_predict"], width="stretch",
              help="Autoplay: one event per tick")
    t4.selectbox("Speed", SPEEDS, key=mirror("lab_speed"), on_change=copy_back("lab_speed"),
                 format_func=lambda v: f"{v:g} / s", label_visibility="collapsed", help="Autoplay speed")
    interval = 1.0 / st.session_state["lab_speed"] if playing else None
    st.fragment(run_every=interval)(lab_views)(runs, settings)


main()
