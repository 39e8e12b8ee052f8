"""Why did it miss? Two requests, one verdict from the engine, and the rule that explains it.

A view over one :class:`~teaching.pages.why_miss_session.WhyMissSession` kept in session state:
widgets -> its fields -> :meth:`~teaching.pages.why_miss_session.WhyMissSession.run` (r1 runs on a
simulator, r2's lookup is the engine's own ``get_computed_blocks``) -> explanation + both requests
as token blocks (HTML, shown at once).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from engine.hashing import HASH_FUNCTIONS
from teaching.pages.real_tokens import MODE_HELP, TOKENIZER_MODES, WORDS
from teaching.pages.why_miss_session import FIELDS, PRESETS, WhyMissSession
from ui.projector import projected_table
from ui.text import plain_md
from viz.theme import OUTLINES
from viz.tokens import TOKENS_CSS
from viz.why_miss import hash_rows, request_html

KEY = "why_miss"  # the page's one key in st.session_state
wm: WhyMissSession = st.session_state.setdefault(KEY, WhyMissSession())


def load_preset() -> None:
    """Copy the chosen preset into the session and its request boxes (the boxes stay editable)."""
    wm.load_preset(st.session_state["wm_preset"])
    for name in FIELDS:
        st.session_state[f"wm_{name}"] = getattr(wm, name)


# First visit, or Streamlit dropped the widgets' state after a visit to another page: the session has them.
for name in ("preset", *FIELDS):
    st.session_state.setdefault(f"wm_{name}", getattr(wm, name))

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
wm.block_size = int(top2.number_input("Block size", min_value=1, max_value=64, value=app_block_size, step=1,
                                      key="wm_block_size"))
wm.algo = top3.selectbox("Hash algorithm", algos, index=algos.index(app_algo) if app_algo in algos else 0, key="wm_algo")
wm.tokenizer = st.radio("Tokenizer", TOKENIZER_MODES, horizontal=True, key="wm_tokenizer",
                        help="\n\n".join(f"**{k}**: {v}" for k, v in MODE_HELP.items()))

for column, (name, role) in zip(st.columns(2), [("r1", "cached"), ("r2", "looked up")]):
    with column:
        st.markdown(f"**{name}** ({role})")
        st.text_area(f"{name} prompt ({'words' if wm.tokenizer == WORDS else 'text'})", key=f"wm_{name}_prompt",
                     height=90)
        salt, lora = st.columns(2)
        salt.text_input(f"{name} cache salt", key=f"wm_{name}_salt")
        lora.text_input(f"{name} LoRA name", key=f"wm_{name}_lora")
for name in FIELDS:  # the boxes' values, into the session
    setattr(wm, name, st.session_state[f"wm_{name}"])

result = wm.run()
if result is None:
    st.error(plain_md(str(wm.error)))
    st.stop()

explanation = wm.explanation()
verdict = st.success if result.num_hit_blocks else st.warning
verdict(f"#### {explanation.headline}")  # big enough to read from the back of a room
st.markdown("\n".join(f"- {plain_md(reason)}" for reason in explanation.reasons))

st.html(TOKENS_CSS)
st.html(request_html(result, False, "r1: ran first, its full blocks are now in the hash table"))
st.html(request_html(result, True, "r2: hits come from the engine's lookup"))
st.caption(
    "Dotted outline: the first token that differs between r1 and r2." if result.first_diff_token is not None
    else "r1 and r2 have the same tokens: nothing is outlined."
)

st.subheader("Block hashes side by side")
first = result.first_diff_block
differs = OUTLINES["differs"]
projected_table(  # projected: an HTML table in the page's width, so "same hash" is never scrolled away
    pd.DataFrame(hash_rows(result)).style.apply(
        lambda row: [f"border: {differs.css}; font-weight: 700" if row["block"] == first else ""] * len(row), axis=1
    ),
    hide_index=True,
)
if wm.algo.startswith("xxhash"):
    st.caption("xxhash uses a random seed per process, so these hashes change on every run; the verdict does not.")
