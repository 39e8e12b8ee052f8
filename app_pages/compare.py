"""Compare: one workload under caching off / vLLM / classic, and TTFT on the real model.

Thin page: widgets -> teaching.pages.compare (simulator runs, or a timed real-model loop) ->
viz.compare figures -> render. The simulator part is instant; the real-model part runs
only when its button is pressed, and keeps its numbers in the session.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from engine.errors import PrefixLabError
from teaching.pages.compare import PolicyResult, TraceSpec, compare_scenario, compare_trace
from teaching.pages.playground import TUTOR, build_prompt
from teaching.pages.ttft import DEFAULT_REPEATS, measure_ttft, speedup
from teaching.scenarios.library import BUILTIN_SCENARIOS, builtin_titles
from ui.progress import progress_callback
from ui.projector import plotly_chart, projected_table
from ui.settings import current_settings
from viz.compare import policy_bars_html, ttft_figure

PLOT_CONFIG = {"displayModeBar": False}
TRACE = "generated"
TTFT_QUESTIONS = ("What is a KV cache?", "Why split prompts into blocks?", "What is the free queue for?")


def results_table(results: list[PolicyResult]) -> pd.DataFrame:
    return pd.DataFrame([{
        "setting": r.label, "requests": r.requests, "prompt tokens": r.prompt_tokens,
        "tokens hit": r.hit_tokens, "hit rate": f"{r.hit_rate:.0%}", "prefill tokens computed": r.prefill_computed,
        "evictions": r.evictions,
    } for r in results])


def workload_results() -> list[PolicyResult] | None:
    """Widgets for the workload; returns the three runs (None when the workload is invalid)."""
    titles = {TRACE: "Generated trace (shared prefixes, small pool)", **builtin_titles()}
    source = st.selectbox("Workload", list(titles), format_func=titles.__getitem__, key="cmp_source") or TRACE
    if source != TRACE:
        settings = current_settings()
        st.caption("A built-in scenario from the lab, with its own pool and block size unless the sidebar sets them.")
        try:
            return compare_scenario(BUILTIN_SCENARIOS[source], settings.num_blocks, settings.block_size)
        except (PrefixLabError, RuntimeError) as exc:
            st.error(f"This scenario cannot be played with the current settings. {exc}")
            return None
    c = st.columns(5)
    spec = TraceSpec(
        num_requests=int(c[0].number_input("Requests", 1, 500, 40, key="cmp_requests")),
        num_prefixes=int(c[1].number_input("Shared prefixes", 1, 20, 4, key="cmp_prefixes",
                                           help="Popular prefixes come back more often (Zipf-like)")),
        num_blocks=int(c[2].number_input("Pool (blocks)", 4, 256, 16, key="cmp_blocks",
                                         help="Incl. the null block 0. Small pools force evictions.")),
        concurrency=int(c[3].number_input("Requests at once", 1, 8, 2, key="cmp_concurrency")),
        seed=int(c[4].number_input("Seed", 0, 10_000, 0, key="cmp_seed")),
    )
    st.caption(f"Each request: one of {spec.num_prefixes} prefixes ({spec.prefix_blocks} blocks of {spec.block_size} "
               f"tokens) + {spec.suffix_tokens} tokens of its own + {spec.output_tokens} generated. Simulator back end.")
    try:
        return compare_trace(spec)
    except (PrefixLabError, RuntimeError) as exc:
        st.error(f"This trace cannot run: {exc}")
        return None


def ttft_section() -> None:
    st.subheader("Time to first token on the real model")
    st.caption(f"{len(TTFT_QUESTIONS)} questions behind one long system prompt, each sent alone (one generated token), "
               "on two fresh engines sharing the loaded SmolLM2: caching off and caching on, taking turns, "
               f"{DEFAULT_REPEATS} rounds. "
               "Request 1 cannot hit; from request 2 on, the system prompt's blocks come from the cache.")
    if st.button("Measure TTFT", icon=":material/timer:", type="primary", key="cmp_measure"):
        from ui.model import session_engine, shared_model  # imports torch: only when asked

        bar = st.progress(0.0, text="Loading the model…")
        try:
            loaded = shared_model(progress=progress_callback(bar))
            prompts = [build_prompt("chat", q, TUTOR) for q in TTFT_QUESTIONS]
            st.session_state["cmp_ttft"] = measure_ttft(
                lambda caching: session_engine(loaded, enable_prefix_caching=caching, kv_mib=16),
                prompts, progress=progress_callback(bar, "Measuring: "),
            )
        except PrefixLabError as exc:
            st.error(f"The measurement could not run: {exc}")
        bar.empty()
    samples = st.session_state.get("cmp_ttft")
    if not samples:
        st.info("Press **Measure TTFT** (a few seconds on a CPU).")
        return
    plotly_chart(ttft_figure(samples, title="Caching off vs on, request by request"), key="cmp_ttft_fig", config=PLOT_CONFIG, theme=None)
    ratio = speedup(samples)
    on = [s for s in samples if s.caching and s.request > 1]
    if ratio is not None and on:
        st.markdown(f"From request 2 on, caching skipped **{on[0].cached_tokens} of {on[0].prompt_tokens}** prompt tokens "
                    f"and the first token came **{ratio.median:.1f}× sooner** (median of {ratio.rounds} rounds; "
                    f"the rounds ranged from {ratio.low:.1f}× to {ratio.high:.1f}×).")
    st.caption("TTFT is the engine's own reading, from the moment the scheduler picks the request to its first token. "
               "Bars are medians; whiskers run from the fastest to the slowest round. On a busy CPU one reading "
               "can be off by half, which is why one round is not enough.")


def main() -> None:
    st.title("Compare")
    st.caption("The same requests under three cache settings. vLLM 0.33 puts freed blocks without a hash at the "
               "head of the free queue, so cached blocks live longer; vLLM 0.23 (classic) appends every freed "
               "block to the tail.")
    results = workload_results()
    if results:
        st.html(policy_bars_html(results))  # HTML bars: shown with the page, no Plotly.js to load first
        projected_table(results_table(results), hide_index=True)
    ttft_section()


main()
