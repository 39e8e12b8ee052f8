"""The shared sidebar: engine settings every lab-style page reads.

Values live in ``st.session_state`` under the ``cfg_*`` keys (plain keys, mirrored into the
widgets by :mod:`ui.persist`), so they survive page switches and fragment reruns. Other
pages read them with :func:`current_settings`.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from engine.hashing import HASH_FUNCTIONS, resolve_seed
from engine.kv_cache import FREE_POLICIES
from engine.vllm_versions import FREE_POLICY_NOTES, FREE_POLICY_VERSIONS, get_vllm_version
from ui.persist import copy_back, mirror

POLICY_HELP = {policy: f"{FREE_POLICY_VERSIONS[policy]}: {FREE_POLICY_NOTES[policy]}." for policy in FREE_POLICIES}
HASH_ALGOS = ("sha256", "sha256_cbor", "xxhash", "xxhash_cbor")


def seed_note(hash_algo: str, free_policy: str) -> str:
    """The sidebar's line on the hash seed, true for the version the chosen free rule plays
    (a fixed sha256 seed is vLLM 0.33's; vLLM 0.23 draws random bytes per process)."""
    version = get_vllm_version(free_policy)  # "vllm" / "classic" still read as releases
    _seed, why = resolve_seed(hash_algo, None, version.name)
    return f"Hash seed ({FREE_POLICY_VERSIONS[free_policy]}): {why}."


DEFAULTS: dict[str, object] = {"cfg_block_size": None, "cfg_num_blocks": None, "cfg_policy": "vllm", "cfg_hash_algo": "sha256"}


@dataclass(frozen=True)
class LabSettings:
    """``None`` for block size / pool size means "use the scenario's own setting"."""

    block_size: int | None = None
    num_blocks: int | None = None
    free_policy: str = "vllm"
    hash_algo: str = "sha256"

    @property
    def other_policy(self) -> str:
        return next(p for p in FREE_POLICIES if p != self.free_policy)


def init_defaults() -> None:
    for key, value in DEFAULTS.items():
        st.session_state.setdefault(key, value)


def current_settings() -> LabSettings:
    init_defaults()
    s = st.session_state
    return LabSettings(s["cfg_block_size"], s["cfg_num_blocks"], s["cfg_policy"], s["cfg_hash_algo"])


def render_sidebar() -> LabSettings:
    """Draw the settings widgets in the sidebar and return what they say."""
    init_defaults()
    algos = [a for a in HASH_ALGOS if a in HASH_FUNCTIONS]
    with st.sidebar:
        st.markdown("### Engine settings")
        st.number_input("Block size (tokens per block)", min_value=1, max_value=64, step=1,
                        key=mirror("cfg_block_size"), on_change=copy_back("cfg_block_size"),
                        placeholder="from the scenario", help="Empty: use the scenario's own `block_size`.")
        st.number_input("Pool size (blocks, incl. null block 0)", min_value=2, max_value=256, step=1,
                        key=mirror("cfg_num_blocks"), on_change=copy_back("cfg_num_blocks"),
                        placeholder="from the scenario",
                        help="Empty: use the scenario's own `blocks`. Block 0 is the null block, never used.")
        st.radio("Free rule (vLLM version)", list(FREE_POLICIES), key=mirror("cfg_policy"), on_change=copy_back("cfg_policy"),
                 format_func=FREE_POLICY_VERSIONS.__getitem__, horizontal=True,
                 help="\n\n".join(f"**{k}**: {v}" for k, v in POLICY_HELP.items()))
        st.selectbox("Hash algorithm", algos, key=mirror("cfg_hash_algo"), on_change=copy_back("cfg_hash_algo"))
        settings = current_settings()
        st.caption(seed_note(settings.hash_algo, settings.free_policy))
    return settings
