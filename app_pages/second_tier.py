"""A second tier: the device pool and the host tier below it, line by line of a scenario.

Thin page: the scenario text (lesson 13's by default), one slider over its lines, and the player showing
the device pool with the host tier under it (``teaching.pages.second_tier`` builds the tier's view).
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from engine.timeline import block_contents
from teaching.lessons.loader import load_lessons
from teaching.pages.playback import HostPanel, Playback, playback
from teaching.pages.second_tier import host_panel, two_tier_views
from teaching.scenarios.scenario import ScenarioError, run_scenario
from ui.lab_player import PlayerArgs, player, timeline_id
from ui.projector import projector_on

LESSONS = Path(__file__).resolve().parents[1] / "lessons"


@st.cache_data(show_spinner=False)
def default_scenario() -> str:
    lessons, _ = load_lessons(str(LESSONS))
    found = [lesson for lesson in lessons if lesson.slug.endswith("second-tier")]
    return found[0].scenario_text if found else "blocks 9\nblock_size 4\noffload_blocks 16\n"


@st.cache_data(show_spinner=False, max_entries=8)
def timeline(text: str) -> tuple[Playback, list[tuple[str, int, HostPanel, bool]]]:
    """The device pool's timeline, and per line: its source, where it ends, the host tier, whether it loaded back."""
    run = run_scenario(text)
    views = two_tier_views(run)
    lines = [(view.line, span.end, host_panel(view), bool(view.loaded)) for view, span in zip(views, run.spans)]
    return playback(run, block_contents(run.events)), lines


def main() -> None:
    projector = projector_on()
    st.markdown("### A second tier: device pool and host memory")
    st.caption("vLLM's native KV offloading writes every full prompt block to host memory as soon as it is "
               "computed; a prefix evicted from the device pool is loaded back from there instead of recomputed.")
    with st.expander("Scenario: edit it (`offload_blocks N` sizes the host tier)", icon=":material/edit_note:"):
        text = st.text_area("Scenario", default_scenario(), height=220, key="tt_scenario", label_visibility="collapsed")
    try:
        data, lines = timeline(text)
    except ScenarioError as exc:
        st.error(f"This scenario cannot be played: {exc}")
        return
    if not lines:
        st.info("The scenario has no lines to play yet.")
        return
    # Open on the last line that loaded blocks back from the tier (the moment the page is about).
    opening = max((n for n, line in enumerate(lines, start=1) if line[3]), default=len(lines))
    source, step, host, _ = lines[st.slider("After line", 1, len(lines), opening, key="tt_line") - 1]
    st.markdown(f"**{source}**")
    player(PlayerArgs(data=data, data_id=timeline_id("second_tier", text), step=step, mode="view", host=host,
                      projector=projector), key="tier_player")


main()
