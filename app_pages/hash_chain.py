"""Hash chain: a prompt as a chain of block hashes; edit one token and watch every later hash change.

A view over one :class:`~teaching.pages.hash_chain.HashChainPage` kept in session state: widgets ->
its fields -> :meth:`~teaching.pages.hash_chain.HashChainPage.run` (a real simulator run) -> the chain as HTML.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from engine.hashing import HASH_FUNCTIONS
from teaching.pages.hash_chain import (
    EDIT,
    MODES,
    OTHER,
    TOKEN_IDS,
    WORDS,
    HashChainPage,
    default_new_token,
    default_prompt,
)
from teaching.scenarios.describe import describe_extra_keys
from ui.projector import projected_table
from ui.text import plain_md
from viz.hash_chain import hash_chain_css, hash_chain_html, lookup_text, short

KEY = "hash_chain"  # the page's one key in st.session_state
MAX_DRAWN_BLOCKS = 32  # one row and one step button per block: beyond this the chain is too long to follow
MAX_EXPLAINED_BLOCKS = 8  # longer chains keep their block-by-block formulas folded away
ALGOS = list(HASH_FUNCTIONS)  # sha256, sha256_cbor, xxhash, xxhash_cbor: the engine's own list

hc: HashChainPage = st.session_state.setdefault(KEY, HashChainPage())
st.set_page_config(layout="wide")  # the figures need the width on a projector
st.title("Hash chain")
st.caption(
    "Every full block gets a hash of (parent hash, its tokens, extra keys). Because the parent is itself "
    "a hash of everything before, one hash stands for the whole prefix: change one token and every later "
    "hash changes. r1 runs first and leaves its blocks in the hash table; r2 is then hashed and looked up."
)

c1, c2, c3, c4 = st.columns(4)
# Defaults from the app's sidebar settings when there are any; this page works without them too.
app_algo = st.session_state.get("cfg_hash_algo", "sha256")
app_block_size = st.session_state.get("cfg_block_size") or 4
hc.algo = c1.selectbox("Hash algorithm", ALGOS, index=ALGOS.index(app_algo) if app_algo in ALGOS else 0, key="hc_algo")
hc.seed_text = c2.text_input("Seed (blank = default)", key="hc_seed")
hc.block_size = int(c3.number_input("Block size", min_value=1, max_value=64, value=int(app_block_size), step=1,
                                    key="hc_block_size"))
hc.mode = c4.radio("Prompt as", MODES, horizontal=True, key="hc_mode",
                   help="SmolLM2: the text through the model's own tokenizer, ids shown (chat: inside its chat template)")

p1, p2 = st.columns(2)
hc.prompt = p1.text_area(
    "r1: prompt" + {WORDS: " (words, separated by spaces)", TOKEN_IDS: " (token ids)"}.get(hc.mode, " (text)"),
    value=default_prompt(hc.mode), key=f"hc_prompt_{hc.mode}", height=80,
)
with p2:
    hc.how = OTHER if hc.real else st.radio("r2 is", [EDIT, OTHER], horizontal=True, key="hc_how")
    if hc.how == EDIT:
        e1, e2 = st.columns(2)
        hc.edit_pos = int(e1.number_input("Edit token at position (from 0)", min_value=0, value=11, step=1,
                                          key="hc_edit_pos"))
        hc.edit_new = e2.text_input("New token", value=default_new_token(hc.mode), key=f"hc_edit_new_{hc.mode}")
    else:
        hc.prompt2 = st.text_area("r2: prompt", value=hc.prompt, key=f"hc_prompt2_{hc.mode}", height=80)

k1, k2, k3, k4 = st.columns(4)
hc.r1_salt = k1.text_input("r1 cache salt", key="hc_r1_salt")
hc.r1_lora = k2.text_input("r1 LoRA name", key="hc_r1_lora")
hc.r2_salt = k3.text_input("r2 cache salt", key="hc_r2_salt")
hc.r2_lora = k4.text_input("r2 LoRA name", key="hc_r2_lora")

result = hc.run()
if result is None:
    st.error(plain_md(str(hc.error)))
    st.stop()

probe_blocks, cached_blocks = result.probe.blocks, result.cached.blocks
if len(probe_blocks) > MAX_DRAWN_BLOCKS or len(cached_blocks) > MAX_DRAWN_BLOCKS:
    st.warning(
        f"The chain shows the first {MAX_DRAWN_BLOCKS} blocks only (r1 has {len(cached_blocks)}, r2 has "
        f"{len(probe_blocks)}): a longer chain is too long to follow. "
        "A larger block size shows the whole prompt."
    )
drawn_cached, drawn_probe = cached_blocks[:MAX_DRAWN_BLOCKS], probe_blocks[:MAX_DRAWN_BLOCKS]
drawn_full = sum(1 for b in drawn_probe if b.is_full)
st.html(hash_chain_css(drawn_full))
st.html(hash_chain_html(drawn_cached, drawn_probe, none_hash=result.none_hash))
st.caption("▶ Play hashes r2's blocks one by one in your browser; the numbered buttons (or ← → on them) stop at any block.")

with st.expander("How each block of r2 was hashed", expanded=drawn_full <= MAX_EXPLAINED_BLOCKS):
    st.markdown("\n".join(
        f"- **Block {block.index}** = H(parent `{short(block.parent_hash)}`, tokens {plain_md(' '.join(block.tokens_text))}, "
        f"extra keys: {plain_md(describe_extra_keys(block.extra_keys))}) = `{short(block.block_hash)}` → "
        f"{lookup_text(block, result.num_hit_blocks)}"
        for block in result.probe.full_blocks[:MAX_DRAWN_BLOCKS]
    ) or "r2 has no full block: nothing is hashed.")

st.info(
    f"**Seed** {plain_md(result.seed[:16])}{'…' if len(result.seed) > 16 else ''}: {hc.seed()[1]}. "
    f"NONE_HASH = hash(seed) = `{short(result.none_hash)}…`, the parent of block 0."
)
if hc.algo.startswith("xxhash") and not hc.seed_text.strip():
    st.caption(
        "vLLM draws a fresh random xxhash seed in every process; this page keeps one per browser session "
        "so the picture stays put while you edit."
    )
    if st.button("New random seed (like restarting vLLM)", key="hc_reseed"):
        hc.new_seed()
        st.rerun()

m1, m2, m3 = st.columns(3)
m1.metric("r2 blocks hashed", len(result.probe.full_blocks))
m2.metric("hashes that differ from r1", len(hc.changed()))
m3.metric("blocks r2 hits", result.num_hit_blocks)
st.markdown("\n".join(f"- {n}" for n in hc.notes(quote=plain_md)))

with st.expander("Full hashes"):
    projected_table(pd.DataFrame(hc.full_hash_rows()), hide_index=True)
