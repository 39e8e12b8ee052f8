"""A second tier: the device pool and the host tier side by side, line by line of a scenario.

Thin page: the scenario text (lesson 13's by default), one slider over its lines, the view from
``teaching.pages.second_tier`` drawn by ``viz.two_tier_html``.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from teaching.lessons.loader import load_lessons
from teaching.pages.second_tier import two_tier_views
from teaching.scenarios.scenario import ScenarioError, run_scenario
from viz.two_tier_html import two_tier_html

LESSONS = Path(__file__).resolve().parents[1] / "lessons"


@st.cache_data(show_spinner=False)
def default_scenario() -> str:
    lessons, _ = load_lessons(str(LESSONS))
    found = [lesson for lesson in lessons if lesson.slug.endswith("second-tier")]
    return found[0].scenario_text if found else "blocks 9\nblock_size 4\noffload_blocks 16\n"


def main() -> None:
    st.markdown("### A second tier: device pool and host memory")
    st.caption("vLLM's native KV offloading writes every full prompt block to host memory as soon as it is "
               "computed; a prefix evicted from the device pool is loaded back from there instead of recomputed. "
               "Set the tier's size with `offload_blocks N` in the scenario.")
    text = st.text_area("Scenario", default_scenario(), height=180, key="tt_scenario")
    try:
        views = two_tier_views(run_scenario(text))
    except ScenarioError as exc:
        st.error(f"This scenario cannot be played: {exc}")
        return
    if not views:
        st.info("The scenario has no lines to play yet.")
        return
    # Open on the last line that loaded blocks back from the tier (the moment the page is about).
    opening = max((n for n, view in enumerate(views, start=1) if view.loaded), default=len(views))
    index = st.slider("After line", 1, len(views), opening, key="tt_line") - 1
    st.markdown(f"**{views[index].line}**")
    st.markdown(two_tier_html(views[index]), unsafe_allow_html=True)


main()
