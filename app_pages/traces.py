"""Production traces: a real chat service's requests through the real prefix cache.

Thin page: widgets -> teaching.traces (load, replay every policy at every capacity, route
across replicas) -> viz.traces figures. Replays run when asked, with a progress bar, and
are kept in the session per trace and mode.
"""

from __future__ import annotations

import hashlib

import pandas as pd
import streamlit as st

from teaching.traces.curve import Curve
from teaching.traces.loader import TRACE_BLOCK_SIZE, Trace, TraceError
from teaching.traces.page import MAX_PAGE_REPLICAS, MAX_UPLOAD_BYTES, load_file, load_upload, run_curve, run_routers
from teaching.traces.policies import POLICIES
from teaching.traces.replay import MODES, PreparedTrace
from teaching.traces.sources import available_traces
from ui.progress import progress_callback
from ui.projector import plotly_chart, projected_table
from viz.traces import miss_ratio_figure, routing_figure, timeseries_figure

PLOT_CONFIG = {"displayModeBar": False}
UPLOAD = "Upload a trace file…"
AUTO_RUN_BLOCKS = 20_000  # small traces replay at once; bigger ones wait for the button


@st.cache_resource(max_entries=4, show_spinner="Hashing the trace's blocks…")
def prepared_file(path: str, mtime: float) -> PreparedTrace:
    from pathlib import Path

    return PreparedTrace(load_file(Path(path)))


@st.cache_resource(max_entries=2, show_spinner="Hashing the trace's blocks…")
def prepared_upload(name: str, digest: str, _data: bytes) -> PreparedTrace:
    return PreparedTrace(load_upload(name, _data))


def choose_trace() -> tuple[str, PreparedTrace] | None:
    sources = available_traces()
    choice = st.selectbox("Trace", [*sources, UPLOAD], key="tr_source")
    try:
        if choice == UPLOAD:
            upload = st.file_uploader(f"A Mooncake-format JSON-lines file (at most {MAX_UPLOAD_BYTES // 2**20} MiB)",
                                      type=["jsonl", "json", "txt"], key="tr_upload")
            if upload is None:
                st.info("Each line: `timestamp` (ms), `input_length`, `output_length`, `hash_ids` (512-token blocks).")
                return None
            data = upload.getvalue()
            digest = hashlib.sha256(data).hexdigest()
            return f"upload:{digest}", prepared_upload(upload.name, digest, data)
        path = sources[choice]
        return f"file:{path}", prepared_file(str(path), path.stat().st_mtime)
    except (TraceError, OSError) as exc:
        st.error(f"This trace cannot be replayed. {exc}")
        return None


def describe(trace: Trace) -> None:
    records = trace.records
    c = st.columns(4)
    c[0].metric("Requests", f"{len(records):,}")
    c[1].metric("Block lookups", f"{trace.num_blocks:,}", help=f"hash_ids of {TRACE_BLOCK_SIZE} tokens")
    c[2].metric("Mean prompt (tokens)", f"{trace.num_input_tokens / len(records):,.0f}")
    c[3].metric("Duration", f"{(records[-1].timestamp - records[0].timestamp) / 60_000:.1f} min")


def curve_table(curve: Curve) -> pd.DataFrame:
    rows = []
    for i, blocks in enumerate(curve.capacities):
        row = {"capacity (tokens)": f"{blocks * TRACE_BLOCK_SIZE:,}", "blocks": blocks}
        row.update({POLICIES[p]: f"{curve.results[p][i].total.token_hit_rate:.1%}" for p in curve.results})
        rows.append(row)
    rows.append({"capacity (tokens)": "unbounded", "blocks": None,
                 **{POLICIES[p]: f"{curve.ceiling.total.token_hit_rate:.1%}" for p in curve.results}})
    return pd.DataFrame(rows)


def curve_section(key: str, prepared: PreparedTrace, mode: str) -> Curve | None:
    curves: dict = st.session_state.setdefault("tr_curves", {})
    run = st.button(f"Replay {len(POLICIES)} policies × 8 capacities", type="primary", icon=":material/play_arrow:",
                    key="tr_run")
    if (key, mode) not in curves and (run or prepared.trace.num_blocks <= AUTO_RUN_BLOCKS):
        bar = st.progress(0.0, text="Replaying…")
        curves[(key, mode)] = run_curve(prepared, mode, progress=progress_callback(bar))
        bar.empty()
    curve = curves.get((key, mode))
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
    projected_table(curve_table(curve), hide_index=True)
    return curve


def series_section(curve: Curve) -> None:
    st.subheader("Along the trace")
    labels = {f"{b * TRACE_BLOCK_SIZE:,} tokens": i for i, b in enumerate(curve.capacities)}
    chosen = st.select_slider("Capacity", list(labels), value=list(labels)[len(labels) // 2], key="tr_series_cap")
    index = labels[chosen]
    plotly_chart(timeseries_figure({p: rs[index] for p, rs in curve.results.items()}),
                    key="tr_series_fig", config=PLOT_CONFIG, theme=None)


def routing_section(key: str, prepared: PreparedTrace, mode: str) -> None:
    st.subheader("Several replicas behind a router")
    c = st.columns(3)
    replicas = int(c[0].number_input("Replicas", 2, MAX_PAGE_REPLICAS, 4, key="tr_replicas"))
    blocks = int(c[1].number_input("Blocks per replica", 1, 200_000, 2_000, step=500, key="tr_rep_blocks",
                                   help=f"{TRACE_BLOCK_SIZE} tokens each"))
    policy = c[2].selectbox("Policy", ["vllm", "classic", "radix"], format_func=POLICIES.__getitem__,
                            key="tr_rep_policy") or "vllm"
    runs: dict = st.session_state.setdefault("tr_routes", {})
    setting = (key, mode, replicas, blocks, policy)
    if st.button("Compare routers", icon=":material/alt_route:", key="tr_route_run"):
        bar = st.progress(0.0, text="Routing…")
        runs[setting] = run_routers(prepared, policy, blocks, replicas, mode,
                                    progress=progress_callback(bar))
        bar.empty()
    results = runs.get(setting)
    if results is None:
        st.caption("Random, round-robin, least-loaded, longest cached prefix, and a blend of prefix and load.")
        return
    plotly_chart(routing_figure(results), key="tr_route_fig", config=PLOT_CONFIG, theme=None)
    projected_table(pd.DataFrame([{
        "router": name, "hit rate": f"{r.total.token_hit_rate:.1%}",
        "requests per replica": " / ".join(str(c.requests) for c in r.replicas),
        "busiest / mean prefill": f"{r.load_balance()['computed_tokens_max_over_mean']:.2f}",
    } for name, r in results.items()]), hide_index=True)


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
    mode = st.radio("Timing", MODES, horizontal=True, key="tr_mode", format_func={
        "sequential": "one at a time", "overlap": "overlapping (timestamps + output lengths)"}.get,
        help="One at a time (default): each request is freed before the next. Overlapping: requests hold their "
             "blocks while they decode (30 ms per output token) and wait when the pool is full.")
    curve = curve_section(key, prepared, mode)
    if curve is not None:
        series_section(curve)
    routing_section(key, prepared, mode)


main()
