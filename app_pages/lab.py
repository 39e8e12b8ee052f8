"""Block pool & eviction lab: a scenario's event log, played in the browser.

Thin page: read the widgets, take both policies' runs from the session (played once), and
hand the whole timeline to the browser player (ui.lab_player), which steps, scrubs and
animates client-side. The server only hears back when playback rests (for the URL).
"""

from __future__ import annotations

import streamlit as st

from engine.vllm_versions import FREE_POLICY_NOTES, FREE_POLICY_VERSIONS
from teaching.lab import EvictionQuestion, next_eviction_question, question_text, verdict
from teaching.scenario import ScenarioError, ScenarioRun
from teaching.scenario_library import builtin_titles
from ui.lab_player import lab_player
from ui.persist import copy_back, mirror
from ui.settings import current_settings
from ui.state import CUSTOM, get_runs, init_lab_state, scenario_text, take_player_value, write_url
from ui.style import LAB_CSS, PROJECTOR_CSS
from ui.text import plain_md


# -- callbacks (run before the script, so they may set any state) -------------------------------------
def on_source_change() -> None:
    st.session_state["lab_source"] = st.session_state["_w_lab_source"]
    st.session_state.update(lab_pos=0, lab_block=None, lab_q=None)


def on_predict_change(run: ScenarioRun) -> None:
    st.session_state["lab_predict"] = st.session_state["_w_lab_predict"]
    if st.session_state["lab_predict"]:
        ask(next_eviction_question(run, st.session_state["lab_pos"]))


def ask(question: EvictionQuestion | None) -> None:
    st.session_state.update(lab_q=question, lab_revealed=False)
    st.session_state.pop("_w_lab_guess", None)
    if question is not None:
        st.session_state["lab_pos"] = question.ask_at


def reveal(question: EvictionQuestion) -> None:
    st.session_state.update(lab_revealed=True, lab_pos=question.reveal_at)


# -- pieces ---------------------------------------------------------------------------------------------
def predict_panel(run: ScenarioRun) -> None:
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
    st.markdown(question_text(question))
    revealed = st.session_state.get("lab_revealed", False)
    c1, c2 = st.columns([3, 2])
    guess = c1.pills("Your guess (a block in the free queue)", queue, key="_w_lab_guess", disabled=revealed)
    if not revealed:
        c2.button("Reveal", key="predict_reveal", type="primary", on_click=reveal, args=(question,),
                  disabled=guess is None, width="stretch")
        return
    right, text = verdict(question, guess)
    (st.success if right else st.error)(text)
    c2.button("Next question", key="predict_next", on_click=lambda: ask(next_eviction_question(run, question.reveal_at)),
              width="stretch")


# -- the page -----------------------------------------------------------------------------------------
def main() -> None:
    init_lab_state()
    settings = current_settings()
    projector = st.session_state["lab_projector"]
    st.markdown(LAB_CSS + (PROJECTOR_CSS if projector else ""), unsafe_allow_html=True)
    titles = builtin_titles()
    options = list(titles) + ([CUSTOM] if st.session_state["custom_text"] else [])
    if st.session_state["lab_source"] not in options:
        st.session_state["lab_source"] = options[0]
    if projector:  # one compact row: scenario and the three toggles (the title is the browser tab's)
        c1, t1, t2, t3 = st.columns([1.9, 1.6, 1.6, 1.2], vertical_alignment="center")
    else:
        c0, c1 = st.columns([1, 1.4], vertical_alignment="center")
        c0.markdown("<div class='lab-title'>Block pool &amp; eviction lab</div>", unsafe_allow_html=True)
    c1.selectbox("Scenario", options, key=mirror("lab_source"), on_change=on_source_change,
                 label_visibility="collapsed", format_func=lambda k: "Your scenario (from the editor)" if k == CUSTOM else titles[k])
    try:
        runs = get_runs(scenario_text(st.session_state["lab_source"]), settings)
    except ScenarioError as exc:
        st.error(f"This scenario cannot be played with the current settings. {plain_md(str(exc))}")
        st.caption("Change the sidebar settings (empty = the scenario's own) or fix the scenario in the editor.")
        return
    primary = runs.runs[settings.free_policy]
    scenario = primary.scenario
    take_player_value(len(primary.events))
    if not projector:
        a0, a1 = st.columns([1, 1], vertical_alignment="center")
        with a0.popover(f"About · {primary.num_blocks} blocks × {primary.block_size} tokens",
                        icon=":material/info:", width="stretch"):
            if scenario.description:
                st.markdown(plain_md(scenario.description))
            st.code(scenario.text, language=None, line_numbers=True)
        a1.page_link("app_pages/scenario_editor.py", label="Write a scenario", icon=":material/edit_note:")
        t1, t2, t3 = st.columns([1, 1, 0.8], vertical_alignment="center")
    t1.toggle("Compare versions", key=mirror("lab_compare"), on_change=copy_back("lab_compare"),
              help="Both free-queue rules on the same trace, their free queues side by side")
    t2.toggle("Predict the victim", key=mirror("lab_predict"), on_change=on_predict_change, args=(primary,))
    t3.toggle("Projector", key=mirror("lab_projector"), on_change=copy_back("lab_projector"),
              help="Large type, no sidebar, everything on one screen (or add ?projector=1 to the URL)")
    predicting = st.session_state["lab_predict"]
    if predicting:
        predict_panel(primary)
    other = settings.other_policy if st.session_state["lab_compare"] else None
    settings_key = f"{settings.block_size}|{settings.num_blocks}|{settings.hash_algo}"
    lab_player(
        runs, settings.free_policy, step=st.session_state["lab_pos"], block=st.session_state["lab_block"],
        settings_key=settings_key, compare_with=other,
        labels=(FREE_POLICY_VERSIONS[settings.free_policy], FREE_POLICY_VERSIONS.get(other or "", "")),
        notes=(FREE_POLICY_NOTES[settings.free_policy], FREE_POLICY_NOTES.get(other or "", "")),
        projector=projector, locked=predicting, ack=st.session_state.get("_lab_player_nonce"),
    )
    write_url(settings)


main()
