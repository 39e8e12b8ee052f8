"""Block pool & eviction lab: a scenario's event log, played in the browser.

Thin page: read the widgets, take both policies' runs from the session (played once), and
hand the whole timeline to the browser player (ui.lab_player), which steps, scrubs,
animates and asks "predict the victim" client-side. The server only hears back when
playback rests (for the URL).
"""

from __future__ import annotations

import streamlit as st

from engine.vllm_versions import FREE_POLICY_NOTES, FREE_POLICY_VERSIONS
from teaching.pages.lab import LabRuns
from teaching.scenarios.library import builtin_titles
from teaching.scenarios.scenario import ScenarioError
from ui.lab_player import lab_player
from ui.persist import copy_back, mirror
from ui.projector import projector_on
from ui.settings import LabSettings, current_settings
from ui.state import CUSTOM, get_runs, init_lab_state, scenario_text, take_player_value, write_url
from ui.style import LAB_CSS
from ui.text import plain_md


# -- callbacks (run before the script, so they may set any state) -------------------------------------
def on_source_change() -> None:
    st.session_state["lab_source"] = st.session_state["_w_lab_source"]
    st.session_state.update(lab_pos=0, lab_block=None)


# -- the page -----------------------------------------------------------------------------------------
def main() -> None:
    init_lab_state()
    settings = current_settings()
    projector = projector_on()  # ui.projector reads ?projector=1 and styles the page; the lab only lays out
    st.markdown(LAB_CSS, unsafe_allow_html=True)
    titles = builtin_titles()
    options = list(titles) + ([CUSTOM] if st.session_state["custom_text"] else [])
    if st.session_state["lab_source"] not in options:
        st.session_state["lab_source"] = options[0]
    if projector:  # one compact row: scenario, the two toggles, and room for the Projector switch
        c1, t1, t2, _ = st.columns([2.3, 1.4, 1.4, 1.0], vertical_alignment="center")
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
    if not projector:
        a0, a1 = st.columns([1, 1], vertical_alignment="center")
        with a0.popover(f"About · {primary.num_blocks} blocks × {primary.block_size} tokens",
                        icon=":material/info:", width="stretch"):
            if scenario.description:
                st.markdown(plain_md(scenario.description))
            st.code(scenario.text, language=None, line_numbers=True)
        a1.page_link("app_pages/scenario_editor.py", label="Write a scenario", icon=":material/edit_note:")
        t1, t2 = st.columns([1, 1], vertical_alignment="center")
    t1.toggle("Compare versions", key=mirror("lab_compare"), on_change=copy_back("lab_compare"),
              help="Both free-queue rules on the same trace, their free queues side by side")
    t2.toggle("Predict the victim", key=mirror("lab_predict"), on_change=copy_back("lab_predict"),
              help="Playback stops before each allocation that evicts: pick the block that goes first")
    player_view(runs, settings, projector)


@st.fragment
def player_view(runs: LabRuns, settings: LabSettings, projector: bool) -> None:
    """The player, and the URL that follows it. A fragment: when playback rests and the player reports
    its step, only this part runs again, not the page and its sidebar (a room's lab steps are most of
    its reruns)."""
    take_player_value(len(runs.runs[settings.free_policy].events))
    other = settings.other_policy if st.session_state["lab_compare"] else None
    settings_key = f"{settings.block_size}|{settings.num_blocks}|{settings.hash_algo}"
    lab_player(
        runs, settings.free_policy, step=st.session_state["lab_pos"], block=st.session_state["lab_block"],
        settings_key=settings_key, compare_with=other,
        labels=(FREE_POLICY_VERSIONS[settings.free_policy], FREE_POLICY_VERSIONS.get(other or "", "")),
        notes=(FREE_POLICY_NOTES[settings.free_policy], FREE_POLICY_NOTES.get(other or "", "")),
        projector=projector, predict=st.session_state["lab_predict"], ack=st.session_state.get("_lab_player_nonce"),
    )
    write_url(settings)


main()
