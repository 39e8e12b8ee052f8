"""Playground: prompts to the real model, each request drawn as blocks (hit / computed / partial).

A view over one :class:`~teaching.pages.playground_session.PlaygroundSession` kept in session
state: widgets -> its fields and methods (send, reset, clear) -> ui.playground_views and the lab's
figures at the engine's latest event. Callbacks run before the script, so they may fill the text
boxes; generation runs in the script so its text can stream in.
"""

from __future__ import annotations

import streamlit as st

from engine.config import EngineConfig
from engine.errors import PrefixLabError
from engine.llm_engine import LLMEngine
from teaching import limits
from teaching.pages.playground import CHAT, PRESETS, TEXT
from teaching.pages.playground_session import PlaygroundSession
from ui.class_server import class_server_panel
from ui.engine_view import engine_views
from ui.model import SESSION_KV_MIB, check_rate, note_request, session_engine, shared_model
from ui.persist import bind, pull
from ui.playground_views import load_model_with_progress, pool_caption, show_requests, stream_pending
from ui.settings import current_settings
from ui.text import plain_md

KEY = "playground"  # the session's one key in st.session_state
FIELDS = ("preset", "mode", "system", "message", "text", "continue_chat", "max_tokens", "temperature", "caching",
          "kv_mib")


def session() -> PlaygroundSession:
    return st.session_state.setdefault(KEY, PlaygroundSession(kv_mib=SESSION_KV_MIB))


def build(config: EngineConfig, kv_mib: int) -> LLMEngine:
    return session_engine(shared_model(), kv_mib=kv_mib, config=config)


def engine() -> LLMEngine:
    """This session's engine, rebuilt (empty pool) when caching, the pool or the sidebar's settings change."""
    pg = session()
    lab = current_settings()  # the shared sidebar: block size (empty = 16), free policy, hash algorithm
    try:
        return pg.engine_for((pg.caching, pg.kv_mib, lab.block_size or 16, lab.free_policy, lab.hash_algo), build)
    except PrefixLabError as exc:
        st.error(plain_md(str(exc)))
        st.stop()


def on_send(rest: bool = False) -> None:
    pg = session()
    pull(pg, "pg", FIELDS)
    try:
        check_rate(st.session_state)  # a click, not a preset's queued input: those wait for the answer anyway
    except PrefixLabError as exc:
        pg.error = str(exc)
        return
    if pg.send_rest(engine()) if rest else pg.send(pg.current_text, engine()):
        note_request(st.session_state)


def main() -> None:
    pg = session()
    st.title("Playground")
    st.caption("Your prompts run on a real model, SmolLM2-135M-Instruct, in PrefixLab's own engine: your own engine "
               "and KV pool, weights shared with everyone. The sidebar's block size (empty = 16), free policy and hash "
               "algorithm apply here too; changing one starts a fresh engine.")
    load_model_with_progress()
    eng = engine()
    pool_caption(eng, pg.kv_mib)

    c1, c2, c3, c4, c5 = st.columns([2.1, 1.25, 0.95, 0.95, 1.05], vertical_alignment="bottom")
    c1.selectbox("Preset", list(PRESETS), format_func=lambda k: PRESETS[k].title,
                 **bind(pg, "preset", "pg", then=pg.load_preset))
    c2.radio("Input", [CHAT, TEXT], horizontal=True, format_func=lambda m: "chat" if m == CHAT else "raw text",
             **bind(pg, "mode", "pg"))
    c3.number_input("Max tokens", 1, limits.MAX_GENERATE_TOKENS, **bind(pg, "max_tokens", "pg"))
    c4.number_input("Temperature", 0.0, 2.0, step=0.1, help="0 = greedy (the same prompt always gives the same answer)",
                    **bind(pg, "temperature", "pg"))
    c5.selectbox("KV pool", limits.KV_CHOICES_MIB, format_func=lambda mib: f"{mib} MiB",
                 help="This session's KV memory. Changing it starts a fresh engine (empty pool).", **bind(pg, "kv_mib", "pg"))
    preset = PRESETS[pg.preset]
    st.caption(f"**{preset.title}** ({len(preset.inputs)} inputs, next: {min(pg.next_input + 1, len(preset.inputs))}) "
               f"· {preset.note}")

    if pg.mode == CHAT:
        left, right = st.columns([3, 2])
        left.text_area("System prompt", height=110, **bind(pg, "system", "pg"))
        right.text_area("Your message", height=110, **bind(pg, "message", "pg"))
        st.toggle("Continue the conversation (re-send earlier turns and answers)", **bind(pg, "continue_chat", "pg"))
    else:
        st.text_area("Prompt (raw text, no chat template)", height=150, **bind(pg, "text", "pg"))

    if class_server_panel(pg):  # "send to the class server": the prompt goes to a shared server, not this engine
        return
    b3, _ = st.columns([1, 2])  # its own row: five controls in one row get cut to "Se…" on a projector
    b1, b2, b4, b5 = st.columns([1, 1.6, 1.6, 1], vertical_alignment="center")
    busy = bool(pg.pending)  # drawn before the answer streams in: disabled while it does
    b1.button("Send", type="primary", key="pg_send", on_click=on_send, icon=":material/send:", width="stretch",
              disabled=busy)
    b2.button("Send rest of preset", key="pg_send_rest", on_click=on_send, args=(True,), icon=":material/fast_forward:",
              width="stretch", disabled=busy or not pg.can_send_rest,
              help="This input, then every later input of the preset, one after another")
    b3.toggle("Prefix caching", help="Switching starts a fresh engine (empty pool) with caching on or off",
              **bind(pg, "caching", "pg"))
    b4.button("Reset prefix cache", key="pg_reset", on_click=lambda: pg.reset_cache(engine()),
              icon=":material/restart_alt:", width="stretch")
    b5.button("Clear", key="pg_clear", on_click=pg.clear, icon=":material/delete:", width="stretch")
    if pg.error:
        st.error(plain_md(pg.error))
    if pg.notice:
        st.info(pg.notice)
        pg.notice = None

    had_queue = bool(pg.queue)
    stream_pending(pg, eng)
    if had_queue or busy:  # the preset moved on, or Send was disabled: redraw with Send enabled
        st.rerun()
    show_requests(pg, eng)
    st.subheader("Inside the engine")
    st.caption("The same views as the lab, on this session's real requests: after the latest event, or any earlier one.")
    engine_views(eng)


main()
