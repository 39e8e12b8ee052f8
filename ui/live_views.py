"""The Live page's drawings: each replica's radix tree and numbers, the servers' status, advice, a send form.

Every function draws from a :class:`~teaching.live.page.LivePage` (its session, its cached
trees) or a :class:`~teaching.live.state.LiveState` replayed from a recording.
"""

from __future__ import annotations

import html

import streamlit as st

from teaching.live.client import ClassServerError, send_chat
from teaching.live.diagnose import Advice
from teaching.live.page import LivePage
from teaching.live.radix import top_view
from teaching.live.recent import recent_rows, recent_stores
from teaching.live.session import LiveSession, MetricsView
from teaching.live.state import LiveState, ReplicaState
from teaching.live.tokens import Decode
from ui.projector import plotly_chart, projected_table
from viz.live import cache_history_figure
from viz.live_tree import RUN_COLORS, branch_choices, icicle_figure

PLOT_CONFIG = {"displayModeBar": False}
ALL = "__all__"
TREE_HEIGHT = 480


def legend() -> None:
    st.markdown(" ".join(
        f"<span style='background:{color};color:white;padding:2px 8px;border-radius:4px'>{name}</span>"
        for name, color in (("a run of cached blocks", RUN_COLORS["cached"]),
                            ("stored in the latest batch", RUN_COLORS["new"]),
                            ("smaller branches, folded", RUN_COLORS["fold"]))), unsafe_allow_html=True)
    st.caption("Each rectangle is one unbranched run of blocks (its first words · its block count), as tall as the "
               "blocks under it; left to right is deeper into the prompt. Click one to zoom in, click the leftmost "
               "rectangle to go back.")


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


def draw_replica(page: LivePage, replica: ReplicaState, view: MetricsView | None, decode: Decode | None, key: str,
                 narrow: bool) -> None:
    st.subheader(replica.name or "server")
    metrics_row(replica, view)
    tree = page.radix_of(replica)
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


def draw_state(page: LivePage, state: LiveState, metrics: dict[str, MetricsView], decode: Decode | None,
               key: str) -> None:
    replicas = list(state.replicas.values())
    if len(replicas) > 1:
        projected_table(page.replica_numbers(state, metrics), hide_index=True)
    legend()
    side = len(replicas) > 1 and st.toggle("Trees side by side (narrower: fewer levels and words)", value=False,
                                           key=f"live_side_{key}")
    columns = st.columns(2) if side else None
    for index, replica in enumerate(replicas):
        with columns[index % 2] if columns else st.container():
            draw_replica(page, replica, metrics.get(replica.name), decode, f"{key}_{index}", narrow=bool(columns))
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


def send_form(session: LiveSession) -> None:
    """A request to one of the servers from the page, and the tally of what this page sent."""
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
