"""KV cache groups: a hybrid model's block tables, one per group, after any line of its scenario.

Thin page: a scenario with a 'layers' line (lesson 12's by default), a slider over its lines, and
the groups view (teaching.pages.groups -> viz.groups). Hybrid scenarios run on the simulator with
the layer pattern they name, under vLLM 0.33's rules.
"""

from __future__ import annotations

import streamlit as st

from teaching.pages.groups import groups_view
from teaching.scenarios.library import HYBRID_SLIDING_WINDOW
from teaching.scenarios.scenario import ScenarioError, Step, parse_scenario
from ui.text import plain_md
from viz.groups import groups_html


def main() -> None:
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
    except (ScenarioError, ValueError) as exc:
        st.error(plain_md(str(exc)))
        return
    st.html(groups_html(view))


main()
