"""The lab's views of one engine: the pool, the free queue, block tables and hash table at an event.

Drawn by the Playground on the session's own real engine, at its latest event or one picked on
the slider.
"""

from __future__ import annotations

import streamlit as st

from engine.llm_engine import LLMEngine
from engine.timeline import block_contents, hit_blocks
from teaching.pages.playground import token_piece
from teaching.scenarios.describe import describe_event
from ui.projector import plotly_chart, projector_on
from viz import block_grid, block_tables_figure, free_queue_figure, hash_table_figure, legend_html
from viz.legend import POOL_STATES

PLOT_CONFIG = {"displayModeBar": False}


def engine_views(eng: LLMEngine) -> None:
    """The lab's views of this session's real engine, at its latest event (or one picked on the slider)."""
    events = eng.kv_cache_manager.events.events
    contents = block_contents(events)

    def text(token_id: int) -> str:
        return token_piece(eng.tokenizer, token_id)

    pos = len(events)
    if events:  # a new key per length: the slider jumps to the latest event after every request
        pos = st.slider("Event", 0, len(events), len(events), key=f"pg_event_{len(events)}",
                        help="Drag back to see the cache while a request was running (e.g. its block table).")
        st.markdown(f"**Event {pos}:** " + (describe_event(events[pos - 1], text, contents) if pos else "the empty pool."))
    snap = eng.timeline().state_at(pos)

    stats = eng.kv_cache_manager.prefix_cache_stats
    st.markdown(
        f"after event {pos} of {len(events)} · in use **{snap.num_blocks - 1 - len(snap.free_queue)}** / {snap.num_blocks - 1} blocks · "
        f"cached hashes **{len(snap.hash_table)}** · evictions **{snap.num_evictions}** · "
        f"session hit rate **{stats.hit_rate:.0%}** ({stats.hits} of {stats.queries} prompt tokens)"
    )
    st.markdown(legend_html(POOL_STATES), unsafe_allow_html=True)
    columns = min(16, -(-snap.num_blocks // 3)) if snap.num_blocks <= 48 else 24
    if projector_on():  # 16 px hashes need ~90 px a tile: at most 10 across a 1024 px screen
        columns = min(columns, 10)
    plotly_chart(block_grid(snap, contents=contents, token_text=text, columns=columns), key="pg_grid", config=PLOT_CONFIG)
    plotly_chart(free_queue_figure(snap, contents=contents, token_text=text, per_row=columns), key="pg_queue",
                    config=PLOT_CONFIG)
    st.caption("A finished request holds no blocks: its blocks wait in the free queue, still cached (orange), "
               "until an allocation pops them from the head.")
    left, right = st.columns(2, gap="medium")
    with left:
        plotly_chart(block_tables_figure(snap, hits=hit_blocks(events, pos)), key="pg_tables", config=PLOT_CONFIG)
    with right:
        plotly_chart(hash_table_figure(snap, contents=contents, token_text=text), key="pg_hashes", config=PLOT_CONFIG)
