"""Live: watch a real server's prefix cache (vLLM or ``prefixlab serve``) from its KV events.

A view over one :class:`teaching.live.page.LivePage` kept in session state: server lines ->
its :class:`~teaching.live.session.LiveSession` (subscriber threads, state, recording, metrics) ->
ui.live_views. A fragment redraws once a second while connected; a recording replays into the
same views with a slider.
"""

from __future__ import annotations

import streamlit as st

from engine.errors import PrefixLabError
from teaching.live import diagnose
from teaching.live.frames import Frame, RecordingError, iter_servers, parse_recording
from teaching.live.page import DEFAULT_SERVERS, LIVE, RECORDING, LivePage
from teaching.live.state import state_from_frames
from teaching.live.tokens import Decode, tokenizer_decoder
from ui.class_config import live_autoconnect, live_servers
from ui.live_views import draw_state, send_form, show_advice, status_line

KEY = "live"  # the page's one key in st.session_state
REFRESH_S = 1.0


@st.cache_resource(show_spinner="Loading the model's tokenizer…")
def shared_decoder() -> Decode | None:
    try:
        return tokenizer_decoder()
    except (PrefixLabError, OSError, ValueError):
        return None


def page() -> LivePage:
    return st.session_state.setdefault(KEY, LivePage(servers=live_servers(DEFAULT_SERVERS)))


@st.fragment(run_every=REFRESH_S)
def live_views(decode: Decode | None) -> None:
    lp = page()
    session = lp.session
    if session is None:
        return
    session.ensure_running()  # a subscriber stops itself when nobody watched for a while
    session.drain()
    session.refresh_metrics()
    status_line(session)
    for advice in session.advice(diagnose.SILENCE_S):
        show_advice(advice)
    for notice in list(session.notices)[-4:][::-1]:
        st.caption(f"{notice.text}")
    draw_state(lp, session.state, session.metrics, decode, "live")
    st.download_button("Download the recording (JSON lines)", session.recording_text(), file_name="kv-events.jsonl",
                       mime="application/jsonl", key="live_download", disabled=not session.recording)


def live_mode(decode: Decode | None) -> None:
    lp = page()
    lp.autoconnect(live_autoconnect())  # under `prefixlab class`: every replica, first visit
    st.session_state.setdefault("live_servers", lp.servers)  # the box's key, also after another page
    lp.servers = st.text_area(
        "Servers, one per line: NAME EVENTS REPLAY HTTP", key="live_servers", height=80,
        help="vLLM: start it with --kv-events-config '{\"enable_kv_cache_events\":true,\"publisher\":\"zmq\","
             "\"endpoint\":\"tcp://*:5557\",\"replay_endpoint\":\"tcp://*:5558\"}'. `-` leaves a field out.")
    c1, c2, _ = st.columns([1.4, 1.4, 3], vertical_alignment="center")  # room for the label at 1024 px
    c1.button("Connect", type="primary", on_click=lambda: lp.connect(st.session_state["live_servers"]),
              key="live_connect", icon=":material/sensors:", width="stretch")
    c2.button("Disconnect", on_click=lp.disconnect, key="live_disconnect", disabled=lp.session is None, width="stretch")
    if lp.error:
        st.error(lp.error)
    if lp.session is None:
        st.info("Not connected. Give each server's KV-event endpoint, replay endpoint and HTTP URL, then Connect.")
        return
    live_views(decode)
    if any(e.http for e in lp.session.endpoints):
        send_form(lp.session)


def recording_mode(decode: Decode | None) -> None:
    lp = page()
    upload = st.file_uploader("A recording (JSON lines: topic, seq, payload_b64)", type=["jsonl", "json", "txt"],
                              key="live_upload")
    frames: list[Frame] = lp.recorded_frames()
    if upload is not None:
        try:
            frames = parse_recording(upload.getvalue().decode("utf-8", errors="replace"), upload.name)
        except RecordingError as exc:
            st.error(str(exc))
            return
    elif frames:
        st.caption("Replaying what this page recorded from the live servers.")
    if not frames:
        st.info("Upload a recording, or connect to a server first and come back: its stream is recorded.")
        return
    upto = st.slider("Event batch", 1, len(frames), len(frames), key=f"live_upto_{len(frames)}",
                     help="The cache after this many batches: drag back to watch it fill and evict.") if len(frames) > 1 else 1
    state = state_from_frames(frames, upto)
    servers = ", ".join(name or "(unnamed)" for name in iter_servers(frames))
    st.caption(f"{len(frames)} batches from {servers} · showing the cache after batch {upto}")
    draw_state(lp, state, {}, decode, "rec")


def main() -> None:
    st.title("Live")
    st.caption("A real server's prefix cache, drawn from the KV events it publishes: vLLM names blocks by hash, so each "
               "cached prompt prefix is a path of blocks, parent → child. Hits do not change the cache; the server's "
               "/metrics count them.")
    lp = page()
    lp.source = st.radio("Source", [LIVE, RECORDING], horizontal=True, key="live_mode",
                         format_func=lambda m: "live servers" if m == LIVE else "a recording")
    lp.decode_tokens = st.toggle("Show tokens as text (the default model's tokenizer)", value=True, key="live_decode")
    decode = shared_decoder() if lp.decode_tokens else None
    if lp.source == LIVE:
        live_mode(decode)
    else:
        recording_mode(decode)


main()
