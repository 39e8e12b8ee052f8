"""Production traces: a real chat service's requests through the real prefix cache.

A view over one :class:`~teaching.traces.page.TracesPage` kept in session state: widgets ->
teaching.traces (load, replay every policy at every capacity, route across replicas) -> viz.traces
figures. Replays run when asked, with a progress bar, and are kept in the session per trace and mode.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from teaching.traces.curve import Curve
from teaching.traces.loader import TRACE_BLOCK_SIZE, Trace
from teaching.traces.page import MAX_PAGE_REPLICAS, TracesPage, curve_rows, router_rows
from teaching.traces.policies import POLICIES
from teaching.traces.replay import MODES, PreparedTrace
from ui.progress import progress_callback
from ui.projector import plotly_chart, projected_table
from ui.trace_source import choose_trace
from viz.traces import miss_ratio_figure, routing_figure, timeseries_figure

KEY = "traces"  # the page's one key in st.session_state
PLOT_CONFIG = {"displayModeBar": False}


def page() -> TracesPage:
    return st.session_state.setdefault(KEY, TracesPage())


def describe(trace: Trace) -> None:
    records = trace.records
    c = st.columns(4)
    c[0].metric("Requests", f"{len(records):,}")
    c[1].metric("Block lookups", f"{trace.num_blocks:,}", help=f"hash_ids of {TRACE_BLOCK_SIZE} tokens")
    c[2].metric("Mean prompt (tokens)", f"{trace.num_input_tokens / len(records):,.0f}")
    c[3].metric("Duration", f"{(records[-1].timestamp - records[0].timestamp) / 60_000:.1f} min")


def curve_section(key: str, prepared: PreparedTrace) -> Curve | None:
    mode = page().mode
    run = st.button(f"Replay {len(POLICIES)} policies × 8 capacities", type="primary", icon=":material/play_arrow:",
                    key="tr_run")
    if page().wants_curve(key, prepared, mode, run):
        bar = st.progress(0.0, text="Replaying…")
        page().replay_curve(key, prepared, mode, progress=progress_callback(bar))
        bar.empty()
    curve = page().curves.get((key, mode))
    if curve is None:
        st.info("Press the button: each of the 33 replays sends the whole trace through a real KVCacheManager.")
        return None
    runs = [r for rs in curve.results.values() for r in rs] + [curve.ceiling]
    seconds = sum(r.seconds for r in runs)
    replaying = sum(r.seconds - r.build_seconds for r in runs)
    plotly_chart(miss_ratio_figure(curve), key="tr_curve_fig", config=PLOT_CONFIG, theme=None)
    st.caption(f"{len(runs)} replays in {seconds:.1f} s ({replaying / len(runs) / prepared.trace.num_blocks * 1e6:.1f} µs "
               "per block lookup, building the pools apart). Requests longer than the whole pool cannot run and "
               "count as misses.")
    projected_table(pd.DataFrame(curve_rows(curve)), hide_index=True)
    return curve


def series_section(curve: Curve) -> None:
    st.subheader("Along the trace")
    labels = {f"{b * TRACE_BLOCK_SIZE:,} tokens": i for i, b in enumerate(curve.capacities)}
    chosen = st.select_slider("Capacity", list(labels), value=list(labels)[len(labels) // 2], key="tr_series_cap")
    index = labels[chosen]
    plotly_chart(timeseries_figure({p: rs[index] for p, rs in curve.results.items()}),
                 key="tr_series_fig", config=PLOT_CONFIG, theme=None)


def routing_section(key: str, prepared: PreparedTrace) -> None:
    st.subheader("Several replicas behind a router")
    tp, c = page(), st.columns(3)
    tp.replicas = int(c[0].number_input("Replicas", 2, MAX_PAGE_REPLICAS, tp.replicas, key="tr_replicas"))
    tp.blocks_per_replica = int(c[1].number_input("Blocks per replica", 1, 200_000, tp.blocks_per_replica, step=500,
                                                  key="tr_rep_blocks", help=f"{TRACE_BLOCK_SIZE} tokens each"))
    tp.policy = c[2].selectbox("Policy", ["vllm", "classic", "radix"], format_func=POLICIES.__getitem__,
                               key="tr_rep_policy") or "vllm"
    setting = tp.route_setting(key)
    if st.button("Compare routers", icon=":material/alt_route:", key="tr_route_run"):
        bar = st.progress(0.0, text="Routing…")
        page().route(setting, prepared, progress=progress_callback(bar))
        bar.empty()
    results = page().route(setting)
    if results is None:
        st.caption("Random, round-robin, least-loaded, longest cached prefix, and a blend of prefix and load.")
        return
    plotly_chart(routing_figure(results), key="tr_route_fig", config=PLOT_CONFIG, theme=None)
    projected_table(pd.DataFrame(router_rows(results)), hide_index=True)


def main() -> None:
    st.title("Production traces")
    st.caption("Requests of a real chat service (Mooncake's released traces: prompts as chains of 512-token blocks) "
               "replayed through PrefixLab's own KVCacheManager at many pool sizes, under vLLM's LRU, the classic "
               "rule, SGLang's radix-tree LRU, and Belady's optimum (which knows the future).")
    picked = choose_trace()
    if picked is None:
        return
    key, prepared = picked
    describe(prepared.trace)
    page().mode = st.radio("Timing", MODES, horizontal=True, key="tr_mode", format_func={
        "sequential": "one at a time", "overlap": "overlapping (timestamps + output lengths)"}.get,
        help="One at a time (default): each request is freed before the next. Overlapping: requests hold their "
             "blocks while they decode (30 ms per output token) and wait when the pool is full.")
    curve = curve_section(key, prepared)
    if curve is not None:
        series_section(curve)
    routing_section(key, prepared)


main()
