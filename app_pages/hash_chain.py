"""Hash chain: a prompt as a chain of block hashes; edit one token and watch every later hash change.

Thin page: widgets -> engine (a real simulator run, via ``teaching.pages.prefix_probe``) -> the chain as HTML.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from engine.errors import PrefixLabError
from engine.hashing import HASH_FUNCTIONS, BlockHasher
from teaching.pages.prefix_probe import RequestSpec, parse_token_ids, replace_token
from teaching.pages.real_tokens import REAL, REAL_CHAT, probe_with_tokenizer
from teaching.scenarios.describe import describe_extra_keys
from ui.projector import projected_table
from ui.text import plain_md
from viz.hash_chain import changed_blocks, hash_chain_css, hash_chain_html, lookup_text, short

DEFAULT_PROMPT = "system : you are a helpful tutor . user : my dog ate my homework , what should I do now ?"
DEFAULT_IDS = "1 2 3 4 5 6 7 8 9 10 11 12 13 14"
MAX_DRAWN_BLOCKS = 32  # one row and one step button per block: beyond this the chain is too long to follow
MAX_EXPLAINED_BLOCKS = 8  # longer chains keep their block-by-block formulas folded away
ALGOS = list(HASH_FUNCTIONS)  # sha256, sha256_cbor, xxhash, xxhash_cbor: the engine's own list


def session_seed(algo: str) -> tuple[str, str]:
    """The default seed for ``algo`` and why, kept for this browser session.

    xxhash picks a random seed per process; re-rolling it on every widget change would make
    the hashes jump under the student's eyes, so the page keeps one until "new random seed".
    """
    key = f"hash_chain.default_seed.{algo}"
    if key not in st.session_state:
        hasher = BlockHasher(algo)
        st.session_state[key] = (hasher.seed, hasher.seed_reason)
    return st.session_state[key]


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
algo = c1.selectbox("Hash algorithm", ALGOS, index=ALGOS.index(app_algo) if app_algo in ALGOS else 0, key="hc_algo")
seed_text = c2.text_input("Seed (blank = default)", key="hc_seed")
block_size = int(c3.number_input("Block size", min_value=1, max_value=64, value=int(app_block_size), step=1, key="hc_block_size"))
mode = c4.radio("Prompt as", ["words", "token ids", REAL, REAL_CHAT], horizontal=True, key="hc_mode",
                help="SmolLM2: the text through the model's own tokenizer, ids shown (chat: inside its chat template)")
real = mode in (REAL, REAL_CHAT)

p1, p2 = st.columns(2)
prompt_text = p1.text_area(
    "r1: prompt" + {"words": " (words, separated by spaces)", "token ids": " (token ids)"}.get(mode, " (text)"),
    value=DEFAULT_IDS if mode == "token ids" else DEFAULT_PROMPT, key=f"hc_prompt_{mode}", height=80,
)
with p2:
    how = "another prompt" if real else st.radio("r2 is", ["r1 with one token edited", "another prompt"],
                                                 horizontal=True, key="hc_how")
    if how == "r1 with one token edited":
        e1, e2 = st.columns(2)
        edit_pos = int(e1.number_input("Edit token at position (from 0)", min_value=0, value=11, step=1, key="hc_edit_pos"))
        edit_new = e2.text_input("New token", value="cat" if mode == "words" else "99", key=f"hc_edit_new_{mode}")
    else:
        prompt2_text = st.text_area("r2: prompt", value=prompt_text, key=f"hc_prompt2_{mode}", height=80)

k1, k2, k3, k4 = st.columns(4)
r1_salt = k1.text_input("r1 cache salt", key="hc_r1_salt")
r1_lora = k2.text_input("r1 LoRA name", key="hc_r1_lora")
r2_salt = k3.text_input("r2 cache salt", key="hc_r2_salt")
r2_lora = k4.text_input("r2 LoRA name", key="hc_r2_lora")

if seed_text.strip():
    seed, seed_reason = seed_text.strip(), "given by you"
else:
    seed, seed_reason = session_seed(algo)



def read_prompt(text: str, label: str) -> str | list[int]:
    """Words pass through; token ids are parsed, with the request named in any error."""
    if mode != "token ids":
        return text
    try:
        return parse_token_ids(text)
    except PrefixLabError as err:
        raise type(err)(f"{label}: {err}") from None


try:
    prompt1 = read_prompt(prompt_text, "r1")
    if how == "r1 with one token edited":
        new_token = edit_new if mode == "words" else read_prompt(edit_new, "new token")[0]
        prompt2 = replace_token(prompt1, edit_pos, new_token)
    else:
        prompt2 = read_prompt(prompt2_text, "r2")
    result = probe_with_tokenizer(
        RequestSpec(prompt1, r1_salt, r1_lora), RequestSpec(prompt2, r2_salt, r2_lora),
        mode if real else "words", block_size=block_size, hash_algo=algo, hash_seed=seed,
    )
except PrefixLabError as err:
    st.error(plain_md(str(err)))
    st.stop()

probe_blocks, cached_blocks = result.probe.blocks, result.cached.blocks
num_full = len(result.probe.full_blocks)
changed = changed_blocks(cached_blocks, probe_blocks)
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
    f"**Seed** {plain_md(result.seed[:16])}{'…' if len(result.seed) > 16 else ''}: {seed_reason}. "
    f"NONE_HASH = hash(seed) = `{short(result.none_hash)}…`, the parent of block 0."
)
if algo.startswith("xxhash") and not seed_text.strip():
    st.caption(
        "vLLM draws a fresh random xxhash seed in every process; this page keeps one per browser session "
        "so the picture stays put while you edit."
    )
    if st.button("New random seed (like restarting vLLM)", key="hc_reseed"):
        st.session_state.pop(f"hash_chain.default_seed.{algo}", None)
        st.rerun()

m1, m2, m3 = st.columns(3)
m1.metric("r2 blocks hashed", num_full)
m2.metric("hashes that differ from r1", len(changed))
m3.metric("blocks r2 hits", result.num_hit_blocks)

notes = []
if how == "r1 with one token edited":
    before, after = result.cached.tokens_text[edit_pos], result.probe.tokens_text[edit_pos]
    notes.append(f"r2 is r1 with token {edit_pos} changed from {plain_md(repr(before))} to {plain_md(repr(after))}: "
                 f"it sits in block {edit_pos // block_size}.")
if changed:
    notes.append(
        f"Hashes differ from r1 from block {changed[0]} on ({len(changed)} of {num_full}): "
        "each hash includes its parent, so one change travels down the whole chain."
    )
else:
    notes.append("Every full block of r2 has the same hash as r1's block at the same position.")
if (r1_salt or None) != (r2_salt or None):
    notes.append("The cache salt is an extra key of **block 0 only**, yet every hash differs: the chain carries it.")
if (r1_lora or None) != (r2_lora or None):
    notes.append("The LoRA name is an extra key of **every block**: the same tokens under another adapter give other K/V.")
if len(result.probe.blocks) > num_full:
    tail = result.probe.blocks[-1]
    notes.append(f"Block {tail.index} holds only {len(tail.token_ids)} of {block_size} tokens: a partial block is never hashed.")
st.markdown("\n".join(f"- {n}" for n in notes))

with st.expander("Full hashes"):
    rows = []
    for index in range(max(len(cached_blocks), len(probe_blocks))):
        a = cached_blocks[index] if index < len(cached_blocks) else None
        b = probe_blocks[index] if index < len(probe_blocks) else None
        rows.append({
            "block": index,
            "r1 hash": a.block_hash.hex() if a and a.block_hash else "never hashed",
            "r2 hash": b.block_hash.hex() if b and b.block_hash else "never hashed",
            "r2 extra keys": describe_extra_keys(b.extra_keys) if b else "",
        })
    projected_table(pd.DataFrame(rows), hide_index=True)
