"""Live: watch a real server's prefix cache (vLLM or ``prefixlab serve``) from its KV events.

Thin page: server lines -> :class:`teaching.live.session.LiveSession` (subscriber threads, state,
recording, metrics) -> :mod:`viz.live` figures. A fragment redraws once a second while connected;
a recording replays into the same views with a slider.
"""

from __future__ import annotations

import streamlit as st

from engine.errors import PrefixLabError
from teaching.live.client import ClassServerError, send_chat
from teaching.live.frames import Frame, RecordingError, iter_servers, parse_recording
from teaching.live.session import LiveSession, MetricsView, parse_endpoints
from teaching.live.state import LiveState, ReplicaState, state_from_frames
from teaching.live.tokens import Decode, tokenizer_decoder
from ui.projector import plotly_chart, projected_table
from viz.live import TREE_COLORS, cache_history_figure, prefix_tree_figure

PLOT_CONFIG = {"displayModeBar": False}
DEFAULT_SERVERS = "vllm tcp://127.0.0.1:5557 tcp://127.0.0.1:5558 http://127.0.0.1:8000"
LIVE, RECORDING = "live", "recording"
REFRESH_S = 1.0


@st.cache_resource(show_spinner="Loading the model's tokenizer…")
def shared_decoder() -> Decode | None:
    try:
        return tokenizer_decoder()
    except (PrefixLabError, OSError, ValueError):
        return None


def legend() -> None:
    st.markdown(" ".join(
        f"<span style='background:{color};color:white;padding:2px 8px;border-radius:4px'>{name}</span>"
        for name, color in (("cached (hittable)", TREE_COLORS["cached"]), ("stored in the latest batch", TREE_COLORS["new"]),
                            ("✕ evicted recently", TREE_COLORS["evicted"]))), unsafe_allow_html=True)


def metrics_row(replica: ReplicaState, view: MetricsView | None) -> None:
    cols = st.columns(7)
    cols[0].metric("cached blocks", len(replica.blocks))
    cols[1].metric("cached tokens", replica.cached_tokens())
    cols[2].metric("stored / evicted", f"{replica.total_stored} / {replica.total_removed}")
    latest = view.latest if view else None
    hit = latest.hit_rate if latest else None
    just_now = latest.hit_rate_since(view.previous) if latest and view and view.previous else None
    cols[3].metric("hit rate", "–" if hit is None else f"{hit:.0%}",
                   delta=None if just_now is None else f"{just_now:.0%} just now", delta_color="off",
                   help="vllm:prefix_cache_hits / vllm:prefix_cache_queries (prompt tokens), from /metrics")
    usage = latest.kv_cache_usage if latest else None
    cols[4].metric("KV usage", "–" if usage is None else f"{usage:.0%}", help="vllm:kv_cache_usage_perc")
    running = latest.requests_running if latest else None
    waiting = latest.requests_waiting if latest else None
    cols[5].metric("running / waiting", "–" if running is None else f"{running:.0f} / {waiting or 0:.0f}")
    ttft = latest.mean_ttft_s if latest else None
    cols[6].metric("mean TTFT", "–" if ttft is None else f"{ttft * 1000:.0f} ms",
                   help="every request the server answered: vllm:time_to_first_token_seconds (sum / count)")
    if view and view.error:
        st.caption(f"metrics: {view.error}")


def draw_replica(replica: ReplicaState, view: MetricsView | None, decode: Decode | None, key: str) -> None:
    st.subheader(replica.name or "server")
    metrics_row(replica, view)
    plotly_chart(prefix_tree_figure(replica, decode), key=f"live_tree_{key}", config=PLOT_CONFIG, theme=None)
    if replica.history:
        plotly_chart(cache_history_figure(replica), key=f"live_hist_{key}", config=PLOT_CONFIG, theme=None)


def draw_state(state: LiveState, metrics: dict[str, MetricsView], decode: Decode | None, key: str) -> None:
    legend()
    for index, replica in enumerate(state.replicas.values()):
        draw_replica(replica, metrics.get(replica.name), decode, f"{key}_{index}")
    if state.undecodable:
        st.warning(f"{state.undecodable} frames were not KV-event batches and were skipped.")


# -- live servers ---------------------------------------------------------------------------------------
def on_connect() -> None:
    s = st.session_state
    stop_session()
    try:
        s["live_session"] = LiveSession(parse_endpoints(s["live_servers"])).start()
        s["live_error"] = None
    except PrefixLabError as exc:
        s["live_error"] = str(exc)


def stop_session() -> None:
    session = st.session_state.get("live_session")
    if session is not None:
        session.stop()
    st.session_state["live_session"] = None


@st.fragment(run_every=REFRESH_S)
def live_views(decode: Decode | None) -> None:
    session: LiveSession | None = st.session_state.get("live_session")
    if session is None:
        return
    session.ensure_running()  # a subscriber stops itself when nobody watched for a while
    session.drain()
    session.refresh_metrics()
    status = " · ".join(f"**{e.name}** {'🟢 connected' if session.connected(e.name) else '🟠 waiting for the server…'}"
                        for e in session.endpoints)
    st.markdown(status)
    for notice in list(session.notices)[-4:][::-1]:
        st.caption(f"{notice.text}")
    draw_state(session.state, session.metrics, decode, "live")
    st.download_button("Download the recording (JSON lines)", session.recording_text(), file_name="kv-events.jsonl",
                       mime="application/jsonl", key="live_download", disabled=not session.recording)


def send_form(session: LiveSession) -> None:
    with st.form("live_send"):
        st.markdown("**Send a request to a server** (or send from anywhere: a notebook, `curl`, the Playground)")
        servers = [e for e in session.endpoints if e.http]
        target = st.selectbox("Server", [e.name for e in servers]) if len(servers) > 1 else None
        system = st.text_area("System prompt", "You are PrefixLab's tutor. You explain the KV cache in plain words.", height=70)
        message = st.text_input("Message", "What is a prefix cache?")
        max_tokens = st.number_input("Max tokens", 1, 128, 16)
        sent = st.form_submit_button("Send", type="primary")
    if sent and servers:
        endpoint = next((e for e in servers if e.name == target), servers[0])
        try:
            result = send_chat(str(endpoint.http), [{"role": "system", "content": system}, {"role": "user", "content": message}],
                               max_tokens=int(max_tokens))
        except ClassServerError as exc:
            st.error(str(exc))
        else:
            session.tally.add(result)
    tally = session.tally
    if tally.results:
        st.markdown(f"**{len(tally.results)} requests** from this page · **{tally.hits} hit the cache** · "
                    f"**{tally.tokens_saved} of {tally.prompt_tokens} prompt tokens saved**")
        projected_table(tally.rows(), hide_index=True)


def live_mode(decode: Decode | None) -> None:
    s = st.session_state
    s.setdefault("live_servers", DEFAULT_SERVERS)
    st.text_area("Servers, one per line: NAME EVENTS REPLAY HTTP", key="live_servers", height=80,
                 help="vLLM: start it with --kv-events-config '{\"enable_kv_cache_events\":true,\"publisher\":\"zmq\","
                      "\"endpoint\":\"tcp://*:5557\",\"replay_endpoint\":\"tcp://*:5558\"}'. `-` leaves a field out.")
    c1, c2, _ = st.columns([1.4, 1.4, 3], vertical_alignment="center")  # room for the label at 1024 px
    c1.button("Connect", type="primary", on_click=on_connect, key="live_connect", icon=":material/sensors:", width="stretch")
    c2.button("Disconnect", on_click=stop_session, key="live_disconnect", disabled=s.get("live_session") is None, width="stretch")
    if s.get("live_error"):
        st.error(s["live_error"])
    session: LiveSession | None = s.get("live_session")
    if session is None:
        st.info("Not connected. Give each server's KV-event endpoint, replay endpoint and HTTP URL, then Connect.")
        return
    live_views(decode)
    if any(e.http for e in session.endpoints):
        send_form(session)


# -- a recording ----------------------------------------------------------------------------------------
def recording_mode(decode: Decode | None) -> None:
    upload = st.file_uploader("A recording (JSON lines: topic, seq, payload_b64)", type=["jsonl", "json", "txt"],
                              key="live_upload")
    session: LiveSession | None = st.session_state.get("live_session")
    frames: list[Frame] = []
    if upload is not None:
        try:
            frames = parse_recording(upload.getvalue().decode("utf-8", errors="replace"), upload.name)
        except RecordingError as exc:
            st.error(str(exc))
            return
    elif session is not None and session.recording:
        frames = list(session.recording)
        st.caption("Replaying what this page recorded from the live servers.")
    if not frames:
        st.info("Upload a recording, or connect to a server first and come back: its stream is recorded.")
        return
    upto = st.slider("Event batch", 1, len(frames), len(frames), key=f"live_upto_{len(frames)}",
                     help="The cache after this many batches: drag back to watch it fill and evict.") if len(frames) > 1 else 1
    state = state_from_frames(frames, upto)
    servers = ", ".join(name or "(unnamed)" for name in iter_servers(frames))
    st.caption(f"{len(frames)} batches from {servers} · showing the cache after batch {upto}")
    draw_state(state, {}, decode, "rec")


def main() -> None:
    st.title("Live")
    st.caption("A real server's prefix cache, drawn from the KV events it publishes: vLLM names blocks by hash, so each "
               "cached prompt prefix is a path of blocks, parent → child. Hits do not change the cache; the server's "
               "/metrics count them.")
    mode = st.radio("Source", [LIVE, RECORDING], horizontal=True, key="live_mode",
                    format_func=lambda m: "live servers" if m == LIVE else "a recording")
    decode = shared_decoder() if st.toggle("Show tokens as text (the default model's tokenizer)", value=True,
                                           key="live_decode") else None
    if mode == LIVE:
        live_mode(decode)
    else:
        recording_mode(decode)


main()
