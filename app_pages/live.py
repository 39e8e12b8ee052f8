"""Live: watch a real server's prefix cache (vLLM or ``prefixlab serve``) from its KV events.

Thin page: server lines -> :class:`teaching.live.session.LiveSession` (subscriber threads, state,
recording, metrics) -> :mod:`viz.live` figures. A fragment redraws once a second while connected;
a recording replays into the same views with a slider.
"""

from __future__ import annotations

import html

import streamlit as st

from engine.errors import PrefixLabError
from teaching.live import diagnose
from teaching.live.client import ClassServerError, send_chat
from teaching.live.diagnose import Advice
from teaching.live.frames import Frame, RecordingError, iter_servers, parse_recording
from teaching.live.radix import RadixTree, build_radix, top_view
from teaching.live.recent import recent_rows, recent_stores
from teaching.live.session import LiveSession, MetricsView, parse_endpoints
from teaching.live.state import LiveState, ReplicaState, state_from_frames
from teaching.live.tokens import Decode, tokenizer_decoder
from ui.class_config import live_autoconnect, live_servers
from ui.projector import plotly_chart, projected_table
from viz.live import cache_history_figure
from viz.live_tree import RUN_COLORS, branch_choices, icicle_figure

PLOT_CONFIG = {"displayModeBar": False}
DEFAULT_SERVERS = "vllm tcp://127.0.0.1:5557 tcp://127.0.0.1:5558 http://127.0.0.1:8000"
LIVE, RECORDING = "live", "recording"
REFRESH_S = 1.0
ALL = "__all__"
TREE_HEIGHT = 480


@st.cache_resource(show_spinner="Loading the model's tokenizer…")
def shared_decoder() -> Decode | None:
    try:
        return tokenizer_decoder()
    except (PrefixLabError, OSError, ValueError):
        return None


def legend() -> None:
    st.markdown(" ".join(
        f"<span style='background:{color};color:white;padding:2px 8px;border-radius:4px'>{name}</span>"
        for name, color in (("a run of cached blocks", RUN_COLORS["cached"]),
                            ("stored in the latest batch", RUN_COLORS["new"]),
                            ("smaller branches, folded", RUN_COLORS["fold"]))), unsafe_allow_html=True)
    st.caption("Each rectangle is one unbranched run of blocks (its first words · its block count), as tall as the "
               "blocks under it; left to right is deeper into the prompt. Click one to zoom in, click the leftmost "
               "rectangle to go back.")


def radix_of(replica: ReplicaState) -> RadixTree:
    """The replica's radix tree, rebuilt only when a batch changed it (the fragment redraws every second)."""
    cache: dict[str, tuple[int, int, int, RadixTree]] = st.session_state.setdefault("live_radix_cache", {})
    stamp = (id(replica), replica.batches, len(replica.blocks))
    cached = cache.get(replica.name)
    if cached is None or cached[:3] != stamp:
        cached = (*stamp, build_radix(replica))
        cache[replica.name] = cached
    return cached[3]


def replica_numbers(state: LiveState, metrics: dict[str, MetricsView]) -> list[dict[str, object]]:
    """One row per replica: the numbers to compare side by side."""
    rows = []
    for replica in state.replicas.values():
        view = metrics.get(replica.name)
        latest = view.latest if view else None
        hit = latest.hit_rate if latest else None
        usage = latest.kv_cache_usage if latest else None
        ttft = latest.mean_ttft_s if latest else None
        tree = radix_of(replica)
        rows.append({
            "replica": replica.name or "server", "cached blocks": len(replica.blocks),
            "cached tokens": replica.cached_tokens(), "runs": len(tree.by_id), "prefixes": sum(r.leaves for r in tree.roots),
            "stored": replica.total_stored, "evicted": replica.total_removed,
            "hit rate": "–" if hit is None else f"{hit:.0%}", "KV usage": "–" if usage is None else f"{usage:.0%}",
            "running / waiting": "–" if latest is None or latest.requests_running is None
            else f"{latest.requests_running:.0f} / {latest.requests_waiting or 0:.0f}",
            "mean TTFT (ms)": "–" if ttft is None else f"{ttft * 1000:.0f}",
        })
    return rows


def metrics_row(replica: ReplicaState, view: MetricsView | None) -> None:
    cols = st.columns(4)
    cols[0].metric("cached blocks", len(replica.blocks))
    cols[1].metric("stored / evicted", f"{replica.total_stored} / {replica.total_removed}")
    latest = view.latest if view else None
    hit = latest.hit_rate if latest else None
    just_now = latest.hit_rate_since(view.previous) if latest and view and view.previous else None
    cols[2].metric("hit rate", "–" if hit is None else f"{hit:.0%}",
                   delta=None if just_now is None else f"{just_now:.0%} just now", delta_color="off",
                   help="vllm:prefix_cache_hits / vllm:prefix_cache_queries (prompt tokens), from /metrics")
    ttft = latest.mean_ttft_s if latest else None
    cols[3].metric("mean TTFT", "–" if ttft is None else f"{ttft * 1000:.0f} ms",
                   help="every request the server answered: vllm:time_to_first_token_seconds (sum / count)")
    if view and view.error:
        st.caption(f"metrics: {view.error}")


def draw_replica(replica: ReplicaState, view: MetricsView | None, decode: Decode | None, key: str,
                 narrow: bool) -> None:
    st.subheader(replica.name or "server")
    metrics_row(replica, view)
    tree = radix_of(replica)
    choices = dict(branch_choices(replica, tree.edges(), decode, chars=34 if narrow else 60))
    zoom_id = st.selectbox("Zoom into a branch", [ALL] + list(choices), key=f"live_zoom_{key}",
                           format_func=lambda c: "the whole cache" if c == ALL else choices.get(c, c))
    zoom = tree.find(zoom_id if zoom_id != ALL else None)
    view_ = top_view(tree, zoom)
    # Plotly hides a label wider than its column, so words are cut to what a column holds at 1024 px
    fig = icicle_figure(replica, view_, decode, height=TREE_HEIGHT, levels=3, label_chars=13 if narrow else 26)
    plotly_chart(fig, key=f"live_tree_{key}", config=PLOT_CONFIG, theme=None)
    folded = sum(f.blocks for f in view_.folds)
    st.caption(f"{len(view_.edges)} of {len(tree.by_id)} runs drawn"
               + (f"; {folded} blocks in smaller branches are folded" if folded else ""))
    if replica.history:
        with st.expander("Blocks stored / removed per event batch"):
            plotly_chart(cache_history_figure(replica), key=f"live_hist_{key}", config=PLOT_CONFIG, theme=None)


def draw_state(state: LiveState, metrics: dict[str, MetricsView], decode: Decode | None, key: str) -> None:
    replicas = list(state.replicas.values())
    if len(replicas) > 1:
        projected_table(replica_numbers(state, metrics), hide_index=True)
    legend()
    side = len(replicas) > 1 and st.toggle("Trees side by side (narrower: fewer levels and words)", value=False,
                                           key=f"live_side_{key}")
    columns = st.columns(2) if side else None
    for index, replica in enumerate(replicas):
        with columns[index % 2] if columns else st.container():
            draw_replica(replica, metrics.get(replica.name), decode, f"{key}_{index}", narrow=bool(columns))
    stores = recent_stores(state, decode)
    if stores:
        st.markdown("**Where the latest requests went** (each row: one request's newly cached blocks, "
                    "from the replicas' events)")
        projected_table(recent_rows(stores), hide_index=True)
    if state.undecodable:
        st.warning(f"{state.undecodable} frames were not KV-event batches and were skipped.")


def status_line(session: LiveSession) -> None:
    """Each server's connection as a coloured dot (CSS, no emoji: stock Debian chromium has no emoji font)."""
    parts = []
    for endpoint in session.endpoints:
        on = session.connected(endpoint.name)
        color, words = ("#2e7d32", "connected") if on else ("#ef6c00", "waiting for the server…")
        parts.append(f"<span style='display:inline-block;width:0.7em;height:0.7em;border-radius:50%;"
                     f"background:{color};margin:0 0.3em 0 0.8em'></span><b>{html.escape(endpoint.name)}</b> {words}")
    st.markdown("<div data-testid='live-status'>" + "".join(parts) + "</div>", unsafe_allow_html=True)


def show_advice(advice: Advice) -> None:
    """What to check for a silent server, and the commands that start one publishing here."""
    with st.container(border=True):
        st.markdown(f"**{advice.headline}** Check:\n" + "\n".join(f"- {check}" for check in advice.checks))
        st.markdown("Start PrefixLab's server with KV events published where this page listens:")
        st.code(advice.prefixlab_command, language="bash")
        st.markdown("or vLLM (the same flag):")
        st.code(advice.vllm_command, language="bash")


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
    status_line(session)
    for advice in session.advice(diagnose.SILENCE_S):
        show_advice(advice)
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
    s.setdefault("live_servers", live_servers(DEFAULT_SERVERS))
    if live_autoconnect() and not s.get("live_autoconnected"):  # under `prefixlab class`: every replica, first visit
        s["live_autoconnected"] = True
        on_connect()
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
