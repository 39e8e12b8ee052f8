"""The Playground in AppTest, on the real default model: send, stream, see hits; bad input is kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.conftest import player_args
from viz.theme import STATE_COLORS

ROOT = Path(__file__).resolve().parents[2]
PAGE = str(ROOT / "app_pages" / "playground.py")

pytestmark = pytest.mark.slow  # loads SmolLM2-135M-Instruct (converted once into ~/.cache/prefixlab)


def new_page() -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=180).run()
    assert not at.exception, at.exception
    return at


def block_figures(at: AppTest) -> list[dict]:
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return [f for f in charts if "prompt +" in ((f["layout"].get("title") or {}).get("text") or "")]


def markdown(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def set_small(at: AppTest) -> None:
    at.number_input(key="_w_pg_max_tokens").set_value(3)


def test_shared_system_prompt_second_request_hits() -> None:
    at = new_page()
    assert at.title[0].value == "Playground"
    assert "bytes per token" in "\n".join(c.value for c in at.caption)
    set_small(at)
    at.button(key="pg_send").click().run()
    assert not at.exception, at.exception
    assert "**0 cached**" in markdown(at)
    assert at.text_area(key="_w_pg_message").value == "Why are prompts split into blocks?"  # the preset moved on
    at.button(key="pg_send").click().run()
    assert not at.exception, at.exception
    text = markdown(at)
    assert "**Model:**" in text and "(no text)" not in text
    (newest,) = block_figures(at)  # one request's blocks a run: the newest, until another is picked
    labels = newest["data"][1]["text"]
    assert newest["layout"]["title"]["text"].startswith("req-1")
    assert any("→ #" in label for label in labels)  # physical block ids are shown
    states = [s["fillcolor"] for s in newest["layout"]["shapes"] if s.get("line", {}).get("width") == 1]
    assert STATE_COLORS["hit"] in states  # hit colour: the system prompt's blocks came from the cache
    cached = int(text.split("cached**")[0].rsplit("**", 1)[1].strip())
    assert cached >= 16
    # The session engine is drawn by the player, as the lab draws a scenario: the whole log, at its latest event.
    (shown,) = [player_args(e.proto) for e in at.get("component_instance") if "lab_player" in e.proto.component_name]
    events = at.session_state["playground"].engine.kv_cache_manager.events.events
    assert (shown["mode"], shown["step"], len(shown["data"]["frames"])) == ("engine", len(events), len(events) + 1)
    # Just after req-1 got its blocks, its block table is in that state: the player scrubs back to it.
    after_alloc = next(i + 1 for i, e in enumerate(events) if e.kind == "allocate" and e.request_id == "req-1")
    assert any(row[0] == "req-1" for row in shown["data"]["frames"][after_alloc]["tables"])
    assert not [c for c in at.get("plotly_chart") if "Physical KV blocks" in c.proto.spec]  # no Plotly twin


def test_empty_and_too_long_prompts_show_the_engine_message_and_keep_the_text() -> None:
    at = new_page()
    at.text_area(key="_w_pg_message").set_value("   ")
    at.button(key="pg_send").click().run()
    assert not at.exception
    assert "The prompt is empty" in at.error[0].value
    long_text = "word " * 9000
    at.text_area(key="_w_pg_message").set_value(long_text)
    at.button(key="pg_send").click().run()
    assert not at.exception
    assert "the limit here is 20,000" in at.error[0].value  # teaching.limits: refused before tokenizing
    assert at.text_area(key="_w_pg_message").value == long_text
    long_text = "word " * 3000  # under the size limit, over the pool
    at.text_area(key="_w_pg_message").set_value(long_text)
    at.button(key="pg_send").click().run()
    assert "exceeds" in at.error[0].value or "KV slots" in at.error[0].value


def test_reset_prefix_cache_and_caching_switch() -> None:
    at = new_page()
    at.button(key="pg_reset").click().run()
    assert not at.exception
    assert "Prefix cache cleared" in at.info[0].value
    at.toggle(key="_w_pg_caching").set_value(False).run()
    assert not at.exception
    assert at.session_state["playground"].engine.kv_cache_manager.enable_caching is False
