"""Why did it miss? Two requests, one verdict from the engine, and the rule that explains it.

Thin page: widgets -> engine (r1 runs on a simulator, r2's lookup is the engine's own
``get_computed_blocks``) -> explanation + both requests as token blocks (HTML, shown at once).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from engine.errors import PrefixLabError
from engine.hashing import HASH_FUNCTIONS
from teaching.pages.prefix_probe import BlockTrace, ProbeResult, RequestSpec, RequestTrace
from teaching.pages.real_tokens import MODE_HELP, TOKENIZER_MODES, WORDS, probe_with_tokenizer
from teaching.pages.why_miss import explain
from teaching.scenarios.describe import describe_extra_keys
from ui.projector import projected_table
from ui.text import plain_md
from viz.hash_chain import short
from viz.theme import OUTLINES
from viz.tokens import TOKENS_CSS, token_blocks_html

SYSTEM = "system : you are a helpful tutor . user :"
#: name -> (r1 prompt, salt, LoRA, r2 prompt, salt, LoRA)
PRESETS: dict[str, tuple[str, str, str, str, str, str]] = {
    "One word differs": (
        f"{SYSTEM} my dog ate my homework , help", "", "", f"{SYSTEM} my cat ate my homework , help", "", ""),
    "Same prompt, another cache salt": (
        f"{SYSTEM} explain prefix caching", "alice", "", f"{SYSTEM} explain prefix caching", "bob", ""),
    "Same prompt, r2 uses a LoRA adapter": (
        f"{SYSTEM} explain prefix caching", "", "", f"{SYSTEM} explain prefix caching", "", "sql-lora"),
    "Identical prompts (last-token rule)": (
        "a b c d e f g h i j k l", "", "", "a b c d e f g h i j k l", "", ""),
    "r2 continues r1's conversation": (
        f"{SYSTEM} hi there !", "", "", f"{SYSTEM} hi there ! assistant : hello ! user : a joke please", "", ""),
}
FIELDS = ("wm_r1_prompt", "wm_r1_salt", "wm_r1_lora", "wm_r2_prompt", "wm_r2_salt", "wm_r2_lora")


def load_preset() -> None:
    """Copy the chosen preset into the request fields (the fields stay editable)."""
    for key, value in zip(FIELDS, PRESETS[st.session_state["wm_preset"]]):
        st.session_state[key] = value


def block_states(trace: RequestTrace, is_probe: bool) -> list[str]:
    """hit / computed / partial per block: hits are the engine's, r1 computed all of its blocks."""
    return [
        "partial" if not b.is_full else "hit" if is_probe and b.hit_block_id is not None else "computed"
        for b in trace.blocks
    ]


def block_label(block: BlockTrace, is_probe: bool) -> str | None:
    """Short hash above a block; r2's blocks that were cached but not used say so."""
    if not block.is_full:
        return None
    if is_probe and block.in_table and block.hit_block_id is None:
        return f"{short(block.block_hash)} · cached, not used"
    return short(block.block_hash)


def hash_table(result: ProbeResult) -> pd.DataFrame:
    rows = []
    first_diff = result.first_diff_block
    for index in range(max(len(result.cached.blocks), len(result.probe.blocks))):
        a = result.cached.blocks[index] if index < len(result.cached.blocks) else None
        b = result.probe.blocks[index] if index < len(result.probe.blocks) else None
        rows.append({  # the verdict beside the block number: a narrow screen never scrolls it out of sight
            "block": index,
            "same hash": "✓" if first_diff is None or index < first_diff else "✗ first difference" if index == first_diff else "✗",
            "r1 tokens": " ".join(a.tokens_text) if a else "",
            "r2 tokens": " ".join(b.tokens_text) if b else "",
            "r1 hash": short(a.block_hash) if a and a.block_hash else "never hashed",
            "r2 hash": short(b.block_hash) if b and b.block_hash else "never hashed",
            "r1 extra keys": describe_extra_keys(a.extra_keys) if a else "",
            "r2 extra keys": describe_extra_keys(b.extra_keys) if b else "",
        })
    return pd.DataFrame(rows)


# First visit, or Streamlit dropped the widgets' state after a visit to another page.
if any(key not in st.session_state for key in ("wm_preset", *FIELDS)):
    st.session_state.setdefault("wm_preset", next(iter(PRESETS)))
    load_preset()

st.set_page_config(layout="wide")  # the figures need the width on a projector
st.title("Why did it miss?")
st.caption(
    "r1 runs first and leaves its full blocks in the cache. Then r2 arrives and the engine looks it up. "
    "Positions count from 0; block i holds tokens i×block_size to (i+1)×block_size − 1."
)
top1, top2, top3 = st.columns([2, 1, 1])
top1.selectbox("Example", list(PRESETS), key="wm_preset", on_change=load_preset)
# Defaults from the app's sidebar settings when there are any; this page works without them too.
app_block_size = int(st.session_state.get("cfg_block_size") or 4)
app_algo = st.session_state.get("cfg_hash_algo", "sha256")
algos = list(HASH_FUNCTIONS)
block_size = int(top2.number_input("Block size", min_value=1, max_value=64, value=app_block_size, step=1, key="wm_block_size"))
algo = top3.selectbox("Hash algorithm", algos, index=algos.index(app_algo) if app_algo in algos else 0, key="wm_algo")
tokenizer = st.radio("Tokenizer", TOKENIZER_MODES, horizontal=True, key="wm_tokenizer",
                     help="\n\n".join(f"**{k}**: {v}" for k, v in MODE_HELP.items()))

for column, (name, role) in zip(st.columns(2), [("r1", "cached"), ("r2", "looked up")]):
    with column:
        st.markdown(f"**{name}** ({role})")
        st.text_area(f"{name} prompt ({'words' if tokenizer == WORDS else 'text'})", key=f"wm_{name}_prompt", height=90)
        salt, lora = st.columns(2)
        salt.text_input(f"{name} cache salt", key=f"wm_{name}_salt")
        lora.text_input(f"{name} LoRA name", key=f"wm_{name}_lora")

state = st.session_state
try:
    result = probe_with_tokenizer(
        RequestSpec(state["wm_r1_prompt"], state["wm_r1_salt"], state["wm_r1_lora"]),
        RequestSpec(state["wm_r2_prompt"], state["wm_r2_salt"], state["wm_r2_lora"]),
        tokenizer, block_size=block_size, hash_algo=algo,
    )
except PrefixLabError as err:
    st.error(plain_md(str(err)))
    st.stop()

explanation = explain(result)
verdict = st.success if result.num_hit_blocks else st.warning
verdict(f"#### {explanation.headline}")  # big enough to read from the back of a room
st.markdown("\n".join(f"- {plain_md(reason)}" for reason in explanation.reasons))

diff = result.first_diff_token
st.html(TOKENS_CSS)
for trace, is_probe, title in (
    (result.cached, False, "r1: ran first, its full blocks are now in the hash table"),
    (result.probe, True, "r2: hits come from the engine's lookup"),
):
    st.html(token_blocks_html(
        trace.tokens_text, block_size, block_states(trace, is_probe),
        [block_label(b, is_probe) for b in trace.blocks],
        hover_hashes=[b.block_hash.hex() if b.block_hash else None for b in trace.blocks],
        marked_tokens={diff} if diff is not None else set(), title=title,
    ))
st.caption(
    "Dotted outline: the first token that differs between r1 and r2." if diff is not None
    else "r1 and r2 have the same tokens: nothing is outlined."
)

st.subheader("Block hashes side by side")
table = hash_table(result)
first = result.first_diff_block
differs = OUTLINES["differs"]
projected_table(  # projected: an HTML table in the page's width, so "same hash" is never scrolled away
    table.style.apply(
        lambda row: [f"border: {differs.css}; font-weight: 700" if row["block"] == first else ""] * len(row), axis=1
    ),
    hide_index=True,
)
if algo.startswith("xxhash"):
    st.caption("xxhash uses a random seed per process, so these hashes change on every run; the verdict does not.")
