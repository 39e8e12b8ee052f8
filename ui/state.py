"""The lab's per-student state in ``st.session_state``, and the URL that mirrors it.

Durable values live under plain keys (``lab_*``); widgets use mirror keys (``_w_*``)
because Streamlit drops a widget's state when its page is not shown. The played runs are
kept per session, keyed by (scenario text, settings), so stepping never replays a scenario.
"""

from __future__ import annotations

import streamlit as st

from engine.kv_cache import FREE_POLICIES
from teaching.limits import parse_whole_number
from teaching.pages.lab import LabRuns, build_runs
from teaching.scenarios.library import BUILTIN_SCENARIOS, DEFAULT_SCENARIO
from teaching.scenarios.share import ScenarioStore, text_from_params, url_params
from ui.projector import projector_on
from ui.settings import HASH_ALGOS, LabSettings

CUSTOM = "custom"
LAB_DEFAULTS: dict[str, object] = {
    "lab_source": DEFAULT_SCENARIO,
    "custom_text": "",
    "lab_pos": 0,
    "lab_compare": False,
    "lab_predict": False,
    "lab_block": None,
    "lab_hash": None,
}
MAX_CACHED_RUNS = 4


def init_lab_state() -> None:
    for key, value in LAB_DEFAULTS.items():
        st.session_state.setdefault(key, value)


def scenario_text(source: str) -> str:
    return st.session_state["custom_text"] if source == CUSTOM else BUILTIN_SCENARIOS[source]


def get_runs(text: str, settings: LabSettings) -> LabRuns:
    """Both policies' runs of ``text``, played once per (text, settings) and kept in the session."""
    cache: dict[tuple, LabRuns] = st.session_state.setdefault("_lab_runs", {})
    key = (text, settings.block_size, settings.num_blocks, settings.hash_algo)
    if key not in cache:
        runs = build_runs(text, block_size=settings.block_size, num_blocks=settings.num_blocks, hash_algo=settings.hash_algo)
        while len(cache) >= MAX_CACHED_RUNS:
            cache.pop(next(iter(cache)))
        cache[key] = runs
    return cache[key]


def take_player_value(num_events: int) -> None:
    """Adopt the step (and selected block) the browser player sent when its playback came to rest.

    Each value carries a nonce, so a value is applied once, not on every later rerun.
    """
    value = st.session_state.get("lab_player")
    if not isinstance(value, dict) or value.get("nonce") == st.session_state.get("_lab_player_nonce"):
        return
    st.session_state["_lab_player_nonce"] = value.get("nonce")
    step = value.get("step")
    if isinstance(step, int) and 0 <= step <= num_events:
        st.session_state["lab_pos"] = step
    block = value.get("block")
    st.session_state["lab_block"] = block if isinstance(block, int) and block >= 0 else None


# -- URL -------------------------------------------------------------------------------------------------
@st.cache_resource(show_spinner=False)
def shared_scenarios() -> ScenarioStore:
    """Scenarios too long for a URL, by short id, for every session of this server."""
    return ScenarioStore()


def _int(value: str | None, lo: int, hi: int) -> int | None:
    return parse_whole_number(value, lo, hi)


def restore_from_url() -> None:
    """Once per session: take scenario, step and settings from the URL (bad values are ignored)."""
    if st.session_state.get("_url_restored"):
        return
    st.session_state["_url_restored"] = True
    init_lab_state()
    q = st.query_params
    source = q.get("scenario")
    if source in BUILTIN_SCENARIOS:
        st.session_state["lab_source"] = source
    elif source == CUSTOM:
        text = text_from_params({k: q.get(k) or "" for k in ("sid", "z", "text")}, shared_scenarios())
        if text:
            st.session_state["custom_text"] = text
            st.session_state["editor_text"] = text
            st.session_state["lab_source"] = CUSTOM
    step = _int(q.get("step"), 0, 10**7)
    if step is not None:
        st.session_state["lab_pos"] = step
    if q.get("policy") in FREE_POLICIES:
        st.session_state["cfg_policy"] = q["policy"]
    if q.get("algo") in HASH_ALGOS:
        st.session_state["cfg_hash_algo"] = q["algo"]
    block_size = _int(q.get("bs"), 1, 64)
    if block_size is not None:
        st.session_state["cfg_block_size"] = block_size
    num_blocks = _int(q.get("blocks"), 2, 256)
    if num_blocks is not None:
        st.session_state["cfg_num_blocks"] = num_blocks
    st.session_state["lab_compare"] = q.get("compare") == "1"
    st.session_state["lab_predict"] = q.get("predict") == "1"
    st.session_state["lab_block"] = _int(q.get("block"), 0, 255)


def write_url(settings: LabSettings) -> None:
    """Put the lab's shareable state in the URL (only what differs from the defaults)."""
    s = st.session_state
    params: dict[str, str] = {"scenario": s["lab_source"], "step": str(s["lab_pos"]), "policy": settings.free_policy}
    if s["lab_source"] == CUSTOM:
        params.update(url_params(s["custom_text"], shared_scenarios()))
    if settings.hash_algo != "sha256":
        params["algo"] = settings.hash_algo
    if settings.block_size:
        params["bs"] = str(settings.block_size)
    if settings.num_blocks:
        params["blocks"] = str(settings.num_blocks)
    if s["lab_compare"]:
        params["compare"] = "1"
    if projector_on():  # ui.projector owns the mode; the lab's URL keeps saying it
        params["projector"] = "1"
    if s["lab_predict"]:
        params["predict"] = "1"
    if s["lab_block"] is not None:
        params["block"] = str(s["lab_block"])
    if dict(st.query_params) != params:
        st.query_params.from_dict(params)
