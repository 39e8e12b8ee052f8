"""Under ``prefixlab class`` the Live page connects to every replica on its first visit (AppTest)."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from ui.class_config import LIVE_SERVERS_ENV

ROOT = Path(__file__).resolve().parents[2]
SERVERS = ("replica-0 tcp://127.0.0.1:5997 tcp://127.0.0.1:5998 http://127.0.0.1:8997;"
           "replica-1 tcp://127.0.0.1:5999 tcp://127.0.0.1:6000 http://127.0.0.1:8998")


def test_live_page_connects_to_the_class_replicas(monkeypatch):
    monkeypatch.setenv(LIVE_SERVERS_ENV, SERVERS)
    at = AppTest.from_file(str(ROOT / "app_pages" / "live.py"), default_timeout=60)
    at.session_state["live_decode"] = False  # no tokenizer load
    at.run()
    try:
        assert not at.exception, [e.value for e in at.exception]
        session = at.session_state["live"].session
        assert session is not None
        assert [e.name for e in session.endpoints] == ["replica-0", "replica-1"]
        assert [e.http for e in session.endpoints] == ["http://127.0.0.1:8997", "http://127.0.0.1:8998"]
        assert at.session_state["live_servers"] == SERVERS.replace(";", "\n")
    finally:
        if "live" in at.session_state:
            at.session_state["live"].disconnect()


def test_without_the_class_command_nothing_connects(monkeypatch):
    monkeypatch.delenv(LIVE_SERVERS_ENV, raising=False)
    at = AppTest.from_file(str(ROOT / "app_pages" / "live.py"), default_timeout=60)
    at.session_state["live_decode"] = False
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["live"].session is None
