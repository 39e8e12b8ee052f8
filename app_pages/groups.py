"""KV cache groups: a hybrid model's block tables, one per group, after any line of its scenario.

Thin page: a scenario with a 'layers' line (lesson 12's by default), a slider over its lines, and the
player showing the shared pool with one block table per group below it (teaching.pages.groups builds
the groups, ui.lab_player draws them). Hybrid scenarios run on the simulator with the layer pattern
they name, under vLLM 0.33's rules.
"""

from __future__ import annotations

import streamlit as st

from engine.timeline import block_contents
from teaching.pages.groups import groups_panel, groups_view
from teaching.pages.playback import Playback, line_steps, playback
from teaching.scenarios.library import HYBRID_SLIDING_WINDOW
from teaching.scenarios.scenario import ScenarioError, Step, parse_scenario, run_scenario
from ui.lab_player import PlayerArgs, player, timeline_id
from ui.projector import projector_on
from ui.text import plain_md


@st.cache_data(show_spinner=False, max_entries=8)
def timeline(text: str) -> tuple[Playback, dict[int, int]]:
    """The whole scenario's timeline for the player, and where each line ends in it."""
    run = run_scenario(text)
    return playback(run, block_contents(run.events)), line_steps(run.spans)


def main() -> None:
    projector = projector_on()
    st.markdown("#### KV cache groups")
    st.caption("Hybrid scenarios run on the simulator with the layer pattern they name (vLLM 0.33's hybrid "
               "KV cache: one pool, one block table per group). The real model keeps one group.")
    with st.expander("Scenario: edit it (a 'layers' line names the layer pattern)", icon=":material/edit_note:"):
        text = st.text_area("Scenario", HYBRID_SLIDING_WINDOW, height=220, key="groups_text", label_visibility="collapsed")
    try:
        scenario = parse_scenario(text)
    except ScenarioError as exc:
        st.error(plain_md(str(exc)))
        return
    if scenario.layer_pattern is None:
        st.info("Add a line like `layers sliding:8,full` before the first request to give the model sliding-window layers.")
        return
    lines = [0] + [a.line_no for a in scenario.actions]
    sources = {0: "(before any line)", **{a.line_no: a.source for a in scenario.actions}}
    steps = [a.line_no for a in scenario.actions if isinstance(a, Step)]
    # Open after the last 'step' line: mid-run, while requests still hold blocks (after 'run' they are done).
    line_no = st.select_slider("After line", options=lines, value=steps[-1] if steps else lines[-1],
                               format_func=lambda n: f"{n}: {sources[n]}"[:60], key="groups_line")
    try:
        view = groups_view(scenario, line_no)
        data, at = timeline(text)
    except (ScenarioError, ValueError) as exc:
        st.error(plain_md(str(exc)))
        return
    player(PlayerArgs(data=data, data_id=timeline_id("groups", text), step=at.get(line_no, 0), mode="view",
                      groups=groups_panel(view), projector=projector), key="groups_player")


main()
