"""The Live page in AppTest: a connection that hears nothing says what to check and how to start a server."""

from __future__ import annotations

import time

import pytest
from streamlit.testing.v1 import AppTest

from teaching.live import diagnose
from tests.app.conftest import page_path
from tests.live.conftest import ZMQ_PORTS, free_port


def test_a_silent_connection_says_what_to_check_and_shows_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(diagnose, "SILENCE_S", 1.0)  # the page reads it at each redraw
    port = free_port(ZMQ_PORTS)  # nothing listens there
    at = AppTest.from_file(page_path("live"), default_timeout=60)
    at.session_state["live_decode"] = False  # no tokenizer needed
    at.session_state["live_servers"] = f"lab tcp://127.0.0.1:{port} - -"
    at.run()
    at.button(key="live_connect").click().run()
    assert not at.exception, at.exception
    try:
        assert not any("nothing publishes" in m.value for m in at.markdown)
        time.sleep(1.5)
        at.run()
        assert not at.exception, at.exception
        text = "\n".join(m.value for m in at.markdown)
        assert f"nothing publishes at tcp://127.0.0.1:{port}" in text and f"tcp://*:{port}" in text
        commands = [c.value for c in at.code]
        assert any(c.startswith("prefixlab serve") and f'"endpoint":"tcp://*:{port}"' in c for c in commands)
        assert any(c.startswith("vllm serve") and "--kv-events-config" in c for c in commands)
    finally:
        at.session_state["live"].disconnect()
