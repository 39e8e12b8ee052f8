"""The Playground's drawings: the model's load, the KV pool's numbers, requests as blocks, an answer streaming in.

Each function draws one piece of :class:`~teaching.pages.playground_session.PlaygroundSession`
and its engine; the page (``app_pages/playground.py``) wires widgets to the session.
"""

from __future__ import annotations

from typing import Any, Protocol, cast

import plotly.graph_objects as go
import streamlit as st

from engine.errors import PrefixLabError
from engine.llm_engine import LLMEngine
from teaching.pages.playground import CHAT, RequestView, metrics_text, request_view
from teaching.pages.playground_session import PlaygroundSession
from ui.model import note_request, shared_model
from ui.projector import plotly_chart
from ui.text import plain_md
from viz.tokens import token_blocks_figure

PLOT_CONFIG = {"displayModeBar": False}
SHOWN_REQUESTS = 4  # newest requests drawn as blocks; older ones are listed


class ModelFacts(Protocol):
    """What the Playground reads from the real model's back end (engine.model.runner.ModelBackend), beyond Backend."""

    @property
    def kv_bytes_per_token(self) -> int: ...
    @property
    def kv_cache_bytes(self) -> int: ...
    @property
    def device(self) -> Any: ...
    @property
    def dtype(self) -> Any: ...


def load_model_with_progress() -> None:
    """Load (or find) the shared model; the first load on a server shows the loader's progress."""
    slot = st.empty()

    def progress(fraction: float, message: str) -> None:
        slot.progress(min(1.0, max(0.0, fraction)), text=message)

    try:
        shared_model(progress=progress)
    except PrefixLabError as exc:
        slot.empty()
        st.error(f"The model could not be loaded. {exc}")
        st.stop()
    slot.empty()


def pool_caption(eng: LLMEngine, kv_mib: int) -> None:
    """The KV cache's size: bytes per token, blocks in the pool, the session's share of memory."""
    backend = cast(ModelFacts, eng.backend)  # the Playground always runs the real model
    pool = eng.kv_cache_manager
    st.caption(f"KV cache: **{backend.kv_bytes_per_token:,} bytes per token** (K and V, every layer) · pool "
               f"**{pool.num_blocks - 1} blocks × {pool.block_size} tokens** = {pool.max_tokens_in_pool:,} tokens, "
               f"{backend.kv_cache_bytes / 2**20:.0f} MiB of this session's {kv_mib} MiB budget · "
               f"device {backend.device.type}, {str(backend.dtype).removeprefix('torch.')}")


def blocks_figure(view: RequestView) -> go.Figure:
    first_output = {view.num_prompt_tokens} if len(view.token_text) > view.num_prompt_tokens else set()
    return token_blocks_figure(
        view.token_text, view.block_size, view.states, view.short_hashes, hover_hashes=view.full_hashes,
        physical_ids=view.physical_ids, marked_tokens=first_output, mark="generated", tokens_per_row=view.block_size,
        max_token_chars=6,
        title=f"{view.request_id}: {view.num_prompt_tokens} prompt + {len(view.token_text) - view.num_prompt_tokens} "
              f"generated · {view.num_hit_blocks}/{view.states.count('hit') + view.states.count('computed')} "
              "full blocks hit",
    )


def stream_pending(pg: PlaygroundSession, eng: LLMEngine) -> None:
    """Step the engine until the pending requests finish, drawing their text as it grows; then the
    preset's queued inputs, one after another."""
    while pg.pending:
        item = pg.pending[0]
        box = st.empty()  # emptied when done: the finished request is drawn with the others
        with box.container(border=True):
            st.markdown(f"**{item.id}** · generating…")
            text_slot = st.empty()
            while pg.step(eng):
                text_slot.markdown(plain_md(eng.output_of(item.id).text) + " ▌")
        box.empty()
        if pg.send_queued(eng):
            note_request(st.session_state)


def show_requests(pg: PlaygroundSession, eng: LLMEngine) -> None:
    """The newest requests as text (the newest open, older ones folded) and, in the newest's box, one
    request's blocks: the newest's, or the one picked. One figure a run: every figure on the page is
    serialized again on every rerun, and a room of Playground sessions rerunning with four figures each
    spent a fifth of the server's Python on them."""
    if not pg.history:
        st.info("No request yet. Pick a preset and press **Send**: the first request computes every block; "
                "send the next one to see hits.")
        return
    st.caption("Each row is one block. `block 2 → #17`: logical block 2 of the request is backed by "
               "physical KV block 17, and its hash starts with the 8 hex digits shown (hover for all 64). "
               "A double outline marks the first generated token.")
    ids = [item.id for item in pg.history[:SHOWN_REQUESTS]]
    for index, item in enumerate(pg.history[:SHOWN_REQUESTS]):
        view = request_view(eng, item.id)
        line = metrics_text(view.metrics)
        place = st.container(border=True) if index == 0 else st.expander(f"{item.id} · {line}")
        with place:
            if index == 0:
                st.markdown(line)
            who = "You" if item.mode == CHAT else "Prompt"
            st.markdown(f"**{who}:** {'…' if len(item.user) > 300 else ''}{plain_md(item.user[-300:])}")
            st.markdown(f"**Model:** {plain_md(view.text) if view.text else '(no text)'}")
            if index == 0:
                chosen = ids[0]
                if len(ids) > 1:  # keyed by the newest request: a new answer shows its own blocks first
                    chosen = st.pills("Blocks of", ids, default=ids[0], key=f"pg_blocks_of_{ids[0]}") or ids[0]
                if chosen not in pg.drawn:  # a Plotly figure costs ~0.05 s of Python: build each one once
                    pg.drawn[chosen] = blocks_figure(request_view(eng, chosen))
                pg.keep_drawn(ids)  # only the shown requests' figures stay in the session
                plotly_chart(pg.drawn[chosen], key=f"pg_blocks_{chosen}", config=PLOT_CONFIG, theme=None)
    if len(pg.history) > SHOWN_REQUESTS:
        st.caption("Older: " + ", ".join(i.id for i in pg.history[SHOWN_REQUESTS:]))
