"""The Playground's engine view: the session's real engine drawn by the player, as the lab draws a scenario.

The log so far (its newest ``limits.PLAYER_MAX_FRAMES`` events) goes to the browser once per request, built
once per log length; the player opens at the latest event and steps, scrubs and plays back client-side.
"""

from __future__ import annotations

import streamlit as st

from engine.llm_engine import LLMEngine
from engine.timeline import block_contents
from teaching.pages.playback import Playback, engine_playback
from teaching.pages.playground import token_piece
from ui.lab_player import PlayerArgs, player, timeline_id
from ui.projector import projector_on


def session_playback(eng: LLMEngine) -> Playback:
    """The player's timeline of ``eng``'s log, rebuilt only when the log has grown (or the engine changed)."""
    events = eng.kv_cache_manager.events.events
    stamp = (id(eng), len(events))
    cached = st.session_state.get("pg_playback")
    if cached is None or cached[0] != stamp:
        data = engine_playback(eng, lambda token_id: token_piece(eng.tokenizer, token_id), block_contents(events))
        cached = st.session_state["pg_playback"] = (stamp, data)
    return cached[1]


def engine_views(eng: LLMEngine) -> None:
    """The pool, free queue, block tables and hash table of this session's real engine, at its latest event."""
    events = eng.kv_cache_manager.events.events
    stats = eng.kv_cache_manager.prefix_cache_stats
    st.markdown(f"{len(events)} events so far · session hit rate **{stats.hit_rate:.0%}** "
                f"({stats.hits} of {stats.queries} prompt tokens)")
    data = session_playback(eng)
    player(PlayerArgs(data=data, data_id=timeline_id("playground", id(eng), len(events)), step=len(events) - data.offset,
                      mode="engine", projector=projector_on()), key="pg_player")
    st.caption("Step back (←, or drag the slider) to see the cache while a request was running. A finished request "
               "holds no blocks: its blocks wait in the free queue, still cached (orange), until an allocation pops them.")
