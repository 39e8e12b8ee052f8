"""Playground: prompts to the real model, each request drawn as blocks (hit / computed / partial).

Thin page: widgets -> the session's engine (shared weights, own KV pool) -> RequestView and the
lab's figures at the engine's latest event -> render. Callbacks run before the script, so
they may fill the text boxes; generation runs in the script so its text can stream in.
"""

from __future__ import annotations

from typing import Any, Protocol, cast

import plotly.graph_objects as go
import streamlit as st

from engine.config import EngineConfig
from engine.errors import PrefixLabError
from engine.llm_engine import LLMEngine
from engine.request import SamplingParams
from teaching import limits
from teaching.pages.playground import (
    CHAT,
    PRESETS,
    TEXT,
    RequestView,
    build_prompt,
    metrics_text,
    request_view,
)
from ui.class_server import class_server_panel
from ui.engine_view import engine_views
from ui.model import SESSION_KV_MIB, check_rate, note_request, session_engine, shared_model
from ui.persist import copy_back, mirror
from ui.projector import plotly_chart
from ui.settings import current_settings
from ui.text import plain_md
from viz.tokens import token_blocks_figure

PLOT_CONFIG = {"displayModeBar": False}
SHOWN_REQUESTS = 4  # newest requests drawn as blocks; older ones are listed
DEFAULTS: dict[str, object] = {
    "pg_preset": "shared-system", "pg_mode": CHAT, "pg_system": "", "pg_message": "", "pg_text": "",
    "pg_continue": False, "pg_max_tokens": 24, "pg_temperature": 0.0, "pg_caching": True,
    "pg_step": 0, "pg_history": [], "pg_chat": [], "pg_error": None, "pg_notice": None,
    "pg_pending": [], "pg_queue": [], "pg_kv_mib": SESSION_KV_MIB,
}
KV_BUDGETS = limits.KV_CHOICES_MIB  # MiB per session: small pools show eviction, big ones hold long chats


# -- state and callbacks ----------------------------------------------------------------------------------
def init_state() -> None:
    for key, value in DEFAULTS.items():
        st.session_state.setdefault(key, list(value) if isinstance(value, list) else value)
    if "pg_loaded_preset" not in st.session_state:
        st.session_state["pg_loaded_preset"] = True
        load_preset()


def load_preset() -> None:
    """Copy the chosen preset's first input (and its mode and system prompt) into the boxes."""
    s = st.session_state
    if "_w_pg_preset" in s:
        s["pg_preset"] = s["_w_pg_preset"]
    preset = PRESETS[s["pg_preset"]]
    s.update(pg_mode=preset.mode, pg_system=preset.system, pg_continue=preset.continue_chat, pg_step=0,
             pg_chat=[], pg_error=None)
    fill_input(preset.inputs[0])


def fill_input(text: str) -> None:
    st.session_state["pg_message" if st.session_state["pg_mode"] == CHAT else "pg_text"] = text


def engine() -> LLMEngine:
    """This session's engine; rebuilt (empty pool) when caching is switched or after Clear."""
    s = st.session_state
    lab = current_settings()  # the shared sidebar: block size (empty = 16), free policy, hash algorithm
    wanted = (s["pg_caching"], s["pg_kv_mib"], lab.block_size or 16, lab.free_policy, lab.hash_algo)
    if s.get("pg_engine") is None or s.get("pg_engine_settings") != wanted:
        config = EngineConfig(enable_prefix_caching=wanted[0], block_size=wanted[2], vllm_version=wanted[3],
                              hash_algo=wanted[4])
        s["pg_engine"] = None  # the old pool goes back to the shared budget first
        try:
            s["pg_engine"] = session_engine(shared_model(), kv_mib=s["pg_kv_mib"], config=config)
        except PrefixLabError as exc:
            st.error(plain_md(str(exc)))
            st.stop()
        s["pg_engine_settings"] = wanted
        s.update(pg_history=[], pg_chat=[], pg_pending=[], pg_queue=[])
    return s["pg_engine"]


class ModelFacts(Protocol):
    """What this page reads from the real model's back end (engine.model.runner.ModelBackend), beyond Backend."""

    @property
    def kv_bytes_per_token(self) -> int: ...
    @property
    def kv_cache_bytes(self) -> int: ...
    @property
    def device(self) -> Any: ...
    @property
    def dtype(self) -> Any: ...


def value(name: str) -> object:
    """A setting as the user left it: the widget's value when its callback has not copied it back yet
    (a click on Send right after typing runs before the text box's own callback may have)."""
    s = st.session_state
    if "_w_" + name in s:
        s[name] = s["_w_" + name]
    return s[name]


def submit(text: str) -> bool:
    """Queue one request for ``text`` (the boxes' mode, system prompt and chat history apply)."""
    s = st.session_state
    history = s["pg_chat"] if value("pg_mode") == CHAT and value("pg_continue") else []
    try:
        if s["pg_pending"]:  # one request in flight per student: the model is shared
            raise PrefixLabError("Wait for the current answer to finish before sending another.")
        for name, typed in (("The prompt", text), ("The system prompt", str(value("pg_system")))):
            limits.check_size(name, len(typed), limits.MAX_PROMPT_CHARS, "characters")
        prompt = build_prompt(s["pg_mode"], text, str(value("pg_system")), history)
        max_tokens = min(int(cast(int, value("pg_max_tokens"))), limits.MAX_GENERATE_TOKENS)
        params = SamplingParams(max_tokens=max_tokens, temperature=float(cast(float, value("pg_temperature"))))
        request_id = engine().add_request(prompt, params)
    except PrefixLabError as exc:  # the engine's own words; the text stays in the box
        s["pg_error"] = str(exc)
        return False
    s["pg_error"] = None
    note_request(s)
    s["pg_pending"].append({"id": request_id, "mode": s["pg_mode"], "user": text})
    return True


def current_text() -> str:
    return str(value("pg_message") if value("pg_mode") == CHAT else value("pg_text"))


def advance_preset(sent: str) -> None:
    """When the sent text was the preset's next input, put the one after it in the box."""
    s = st.session_state
    inputs = PRESETS[s["pg_preset"]].inputs
    if s["pg_step"] < len(inputs) and sent == inputs[s["pg_step"]]:
        s["pg_step"] += 1
        if s["pg_step"] < len(inputs):
            fill_input(inputs[s["pg_step"]])


def on_send() -> None:
    text = current_text()
    try:
        check_rate(st.session_state)  # a click, not a preset's queued input: those wait for the answer anyway
    except PrefixLabError as exc:
        st.session_state["pg_error"] = str(exc)
        return
    if submit(text):
        advance_preset(text)


def on_send_rest() -> None:
    """Send this input and every later input of the preset, one after another."""
    s = st.session_state
    inputs = PRESETS[s["pg_preset"]].inputs
    rest = list(inputs[s["pg_step"] + 1:]) if current_text() == inputs[min(s["pg_step"], len(inputs) - 1)] else []
    on_send()
    if s["pg_error"] is None:
        s["pg_queue"] = rest


def on_reset_cache() -> None:
    ok = engine().reset_prefix_cache()
    st.session_state["pg_notice"] = ("Prefix cache cleared: every hash is gone, the next request computes all of its blocks."
                                     if ok else "Reset refused: a request still holds blocks.")


def on_clear() -> None:
    st.session_state["pg_engine"] = None  # the next run builds a fresh engine and pool
    st.session_state.update(pg_error=None, pg_notice=None)


# -- pieces ------------------------------------------------------------------------------------------------
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


def metrics_line(view: RequestView) -> str:
    return metrics_text(view.metrics)


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


def stream_pending(eng: LLMEngine) -> None:
    """Step the engine until the pending requests finish, drawing their text as it grows."""
    s = st.session_state
    while s["pg_pending"]:
        item = s["pg_pending"][0]
        box = st.empty()  # emptied when done: the finished request is drawn with the others
        with box.container(border=True):
            st.markdown(f"**{item['id']}** · generating…")
            text_slot = st.empty()
            try:
                while not eng.get_request(item["id"]).is_finished:
                    eng.step()  # one forward pass, shared with every other student generating now
                    text_slot.markdown(plain_md(eng.output_of(item["id"]).text) + " ▌")
            except (PrefixLabError, RuntimeError) as exc:
                eng.abort_request(item["id"])
                # Blocks of the failed step may be in the prefix cache without their K/V: forget them.
                eng.reset_prefix_cache()
                s["pg_error"] = f"{item['id']} could not run: {exc}"
        box.empty()
        finish(item, eng)
        if s["pg_queue"] and s["pg_error"] is None:
            text = s["pg_queue"].pop(0)
            if submit(text):
                advance_preset(text)
        else:
            s["pg_queue"] = []


def finish(item: dict, eng: LLMEngine) -> None:
    s = st.session_state
    s["pg_pending"].pop(0)
    s["pg_history"].insert(0, item)
    if item["mode"] == CHAT:
        answer = {"role": "assistant", "content": eng.output_of(item["id"]).text}
        turn = [{"role": "user", "content": item["user"]}, answer]
        s["pg_chat"] = (s["pg_chat"] + turn) if s["pg_continue"] else turn


def show_requests(eng: LLMEngine) -> None:
    history = st.session_state["pg_history"]
    if not history:
        st.info("No request yet. Pick a preset and press **Send**: the first request computes every block; "
                "send the next one to see hits.")
        return
    st.caption("Each row is one block. `block 2 → #17`: logical block 2 of the request is backed by "
               "physical KV block 17, and its hash starts with the 8 hex digits shown (hover for all 64). "
               "A double outline marks the first generated token.")
    for index, item in enumerate(history[:SHOWN_REQUESTS]):
        view = request_view(eng, item["id"])
        place = st.container(border=True) if index == 0 else st.expander(f"{item['id']} · {metrics_line(view)}")
        with place:
            if index == 0:
                st.markdown(metrics_line(view))
            who = "You" if item["mode"] == CHAT else "Prompt"
            st.markdown(f"**{who}:** {'…' if len(item['user']) > 300 else ''}{plain_md(item['user'][-300:])}")
            st.markdown(f"**Model:** {plain_md(view.text) if view.text else '(no text)'}")
            plotly_chart(blocks_figure(view), key=f"pg_blocks_{item['id']}", config=PLOT_CONFIG, theme=None)
    if len(history) > SHOWN_REQUESTS:
        st.caption("Older: " + ", ".join(i["id"] for i in history[SHOWN_REQUESTS:]))


# -- the page ----------------------------------------------------------------------------------------------
def main() -> None:
    init_state()
    s = st.session_state
    st.title("Playground")
    st.caption("Your prompts run on a real model, SmolLM2-135M-Instruct, in PrefixLab's own engine: your own engine "
               "and KV pool, weights shared with everyone. The sidebar's block size (empty = 16), free policy and hash "
               "algorithm apply here too; changing one starts a fresh engine.")
    load_model_with_progress()
    eng = engine()
    backend = cast(ModelFacts, eng.backend)  # this page always runs the real model
    pool = eng.kv_cache_manager
    st.caption(f"KV cache: **{backend.kv_bytes_per_token:,} bytes per token** (K and V, every layer) · pool "
               f"**{pool.num_blocks - 1} blocks × {pool.block_size} tokens** = {pool.max_tokens_in_pool:,} tokens, "
               f"{backend.kv_cache_bytes / 2**20:.0f} MiB of this session's {s['pg_kv_mib']} MiB budget · "
               f"device {backend.device.type}, {str(backend.dtype).removeprefix('torch.')}")

    c1, c2, c3, c4, c5 = st.columns([2.1, 1.25, 0.95, 0.95, 1.05], vertical_alignment="bottom")
    c1.selectbox("Preset", list(PRESETS), key=mirror("pg_preset"), on_change=load_preset,
                 format_func=lambda k: PRESETS[k].title)
    c2.radio("Input", [CHAT, TEXT], key=mirror("pg_mode"), on_change=copy_back("pg_mode"), horizontal=True,
             format_func=lambda m: "chat" if m == CHAT else "raw text")
    c3.number_input("Max tokens", 1, limits.MAX_GENERATE_TOKENS, key=mirror("pg_max_tokens"), on_change=copy_back("pg_max_tokens"))
    c4.number_input("Temperature", 0.0, 2.0, step=0.1, key=mirror("pg_temperature"), on_change=copy_back("pg_temperature"),
                    help="0 = greedy (the same prompt always gives the same answer)")
    c5.selectbox("KV pool", KV_BUDGETS, key=mirror("pg_kv_mib"), on_change=copy_back("pg_kv_mib"),
                 format_func=lambda mib: f"{mib} MiB",
                 help="This session's KV memory. Changing it starts a fresh engine (empty pool).")
    preset = PRESETS[s["pg_preset"]]
    st.caption(f"**{preset.title}** ({len(preset.inputs)} inputs, next: {min(s['pg_step'] + 1, len(preset.inputs))}) · {preset.note}")

    if s["pg_mode"] == CHAT:
        left, right = st.columns([3, 2])
        left.text_area("System prompt", key=mirror("pg_system"), on_change=copy_back("pg_system"), height=110)
        right.text_area("Your message", key=mirror("pg_message"), on_change=copy_back("pg_message"), height=110)
        st.toggle("Continue the conversation (re-send earlier turns and answers)", key=mirror("pg_continue"),
                  on_change=copy_back("pg_continue"))
    else:
        st.text_area("Prompt (raw text, no chat template)", key=mirror("pg_text"), on_change=copy_back("pg_text"), height=150)

    if class_server_panel():  # "send to the class server": the prompt goes to a shared server, not this engine
        return
    b3, _ = st.columns([1, 2])  # its own row: five controls in one row get cut to "Se…" on a projector
    b1, b2, b4, b5 = st.columns([1, 1.6, 1.6, 1], vertical_alignment="center")
    busy = bool(s["pg_pending"])  # drawn before the answer streams in: disabled while it does
    b1.button("Send", type="primary", key="pg_send", on_click=on_send, icon=":material/send:", width="stretch",
              disabled=busy)
    b2.button("Send rest of preset", key="pg_send_rest", on_click=on_send_rest, icon=":material/fast_forward:",
              width="stretch", disabled=busy or s["pg_step"] >= len(preset.inputs) - 1,
              help="This input, then every later input of the preset, one after another")
    b3.toggle("Prefix caching", key=mirror("pg_caching"), on_change=copy_back("pg_caching"),
              help="Switching starts a fresh engine (empty pool) with caching on or off")
    b4.button("Reset prefix cache", key="pg_reset", on_click=on_reset_cache, icon=":material/restart_alt:", width="stretch")
    b5.button("Clear", key="pg_clear", on_click=on_clear, icon=":material/delete:", width="stretch")
    if s["pg_error"]:
        st.error(plain_md(s["pg_error"]))
    if s["pg_notice"]:
        st.info(s["pg_notice"])
        s["pg_notice"] = None

    had_queue = bool(s["pg_queue"])
    stream_pending(eng)
    if had_queue or busy:  # the preset moved on, or Send was disabled: redraw with Send enabled
        st.rerun()
    show_requests(eng)
    st.subheader("Inside the engine")
    st.caption("The same views as the lab, on this session's real requests: after the latest event, or any earlier one.")
    engine_views(eng)


main()
