"""Fair sharing of the model (the rate limit; batching is tested in tests/model/test_batching.py), shared-scenario URLs, and user text kept inert (issue 13)."""

from __future__ import annotations

import base64
import random
import time
import zlib

import pytest
from markdown_it import MarkdownIt

from engine.errors import PrefixLabError
from engine.timeline import CacheSnapshot
from teaching import limits
from teaching.scenarios.share import ScenarioStore, compress_text, decompress_text, text_from_params, url_params
from ui.model import check_rate, note_request
from ui.text import plain_md
from viz import hash_table_figure
from viz.blocks import block_grid
from viz.tokens import token_blocks_figure

HOSTILE = [
    "![x](http://example.invalid/a.png)",
    "[click](https://example.invalid)",
    "<https://example.invalid>",
    "<img src=x onerror=alert(1)>",
    "**bold** _it_ `code` $x^2$ :red[red] ~~s~~",
    "&lt;b&gt; &#33;",
]


# -- Markdown ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", HOSTILE)
def test_plain_md_renders_no_markup(text):
    html = MarkdownIt("commonmark").enable("strikethrough").render(plain_md(text))
    for tag in ("<img", "<a ", "<strong", "<em", "<code", "<s>", "<del"):
        assert tag not in html, html


def test_plain_md_keeps_ordinary_text_and_breaks_bare_links():
    assert plain_md("Line 3: a, like 'r0: A'.") == "Line 3: a, like 'r0: A'."
    assert "http&#58;//" in plain_md("see http://example.invalid") and "www&#46;" in plain_md("www.example.invalid")
    assert plain_md("a\nb") == "a  \nb"


# -- Plotly ----------------------------------------------------------------------------------------------
LINK_TOKEN = '<a href="https://example.invalid">x</a>'


def test_plotly_labels_and_hovers_escape_tokens():
    snap = CacheSnapshot.initial(4)
    snap.block_hash[1] = b"h" * 32
    snap.hash_table[b"h" * 32] = [1]
    contents = {b"h" * 32: [7]}
    figures = [
        hash_table_figure(snap, contents=contents, token_text=lambda t: LINK_TOKEN),
        block_grid(snap, contents=contents, token_text=lambda t: LINK_TOKEN),
        token_blocks_figure([LINK_TOKEN, "b"], 2, ["computed"], ["abcd"]),
    ]
    for fig in figures:
        dumped = fig.to_json()
        assert "<a href" not in dumped and "&lt;a href" in dumped


# -- shared scenarios in URLs ----------------------------------------------------------------------------
def test_compressed_scenarios_round_trip_and_bad_values_are_none():
    text = "blocks 9\nrequest r0: A B C D | output=x\nrun\n"
    assert decompress_text(compress_text(text)) == text
    for bad in ["", "!!!", "x" * 10, compress_text("é")[:-3]]:
        assert decompress_text(bad) is None
    bomb = zlib.compress(b"\n" * 50_000_000)  # 50 MB of newlines in ~50 KB
    packed = base64.urlsafe_b64encode(bomb).decode()
    start = time.monotonic()
    assert decompress_text(packed) is None
    assert time.monotonic() - start < 1.0


def test_a_100_kb_scenario_gets_a_short_url_that_brings_it_back():
    rng = random.Random(0)
    lines = ["# " + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(60)) for _ in range(1500)]
    text = "\n".join(lines) + "\nrequest r0: A B\nrun\n"
    assert 90_000 < len(text) <= limits.MAX_SCENARIO_CHARS
    store = ScenarioStore()
    params = url_params(text, store)
    assert sum(len(v) for v in params.values()) <= limits.MAX_URL_SCENARIO_CHARS
    assert text_from_params(params, store) == text
    small = url_params("request r0: A\nrun", store)
    assert "z" in small and text_from_params(small, ScenarioStore()) == "request r0: A\nrun"
    assert text_from_params({"sid": "unknown"}, store) is None


def test_the_store_forgets_the_oldest():
    store = ScenarioStore(capacity=2)
    ids = [store.put(f"request r{i}: A") for i in range(3)]
    assert store.get(ids[0]) is None and store.get(ids[2]) == "request r2: A"


# -- fair sharing ------------------------------------------------------------------------------------------
def test_rate_limit_per_session():
    state: dict = {}
    for _ in range(limits.SESSION_BURST):
        check_rate(state)
        note_request(state)
    with pytest.raises(PrefixLabError, match="Slow down"):
        check_rate(state)
    tokens, then = state["_model_rate"]
    state["_model_rate"] = (tokens, then - limits.SESSION_REFILL_S)  # one refill period later
    check_rate(state)
