"""Links and files that used to take a page (or the server) down: now a clear message (issue 13)."""

from __future__ import annotations

import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from teaching.scenarios.share import compress_text
from tests.app.conftest import new_app
from tests.unit.test_limits import BAD_LESSONS, HEAVY

ROOT = Path(__file__).resolve().parents[2]
LESSONS_PAGE = str(ROOT / "app_pages" / "lessons.py")


def errors(at: AppTest) -> str:
    return "\n".join(e.value for e in at.error)


def test_a_link_with_blocks_99999999999_shows_a_clear_error():
    at = new_app(scenario="custom", text="blocks 99999999999\nrequest r0: A B C D\nrun", step="3")
    start = time.monotonic()
    at.run()
    assert not at.exception, at.exception
    assert "blocks must be at most 4,096" in errors(at)
    assert time.monotonic() - start < 20


def test_a_link_with_step_300000000_shows_a_clear_error():
    at = new_app(scenario="custom", text="request r0: A | max_tokens=5000\nstep 300000000")
    at.run()
    assert not at.exception, at.exception
    assert "step count must be at most" in errors(at)


def test_a_link_to_a_run_that_is_too_big_stops_within_the_time_budget():
    at = new_app(scenario="custom", z=compress_text(HEAVY))
    start = time.monotonic()
    at.run()
    assert not at.exception, at.exception
    assert "took longer than" in errors(at)
    assert time.monotonic() - start < 20  # 3 s of budget, plus the app's own start on a busy machine


def test_a_custom_scenario_in_the_url_is_compressed_and_comes_back():
    text = "# Mine\nblocks 9\nrequest r0: A B C D E | output=x\nrun\n"
    at = new_app(scenario="custom", text=text)
    at.run()
    assert not at.exception and at.session_state["custom_text"] == text
    assert "z" in at.query_params and "text" not in at.query_params
    again = new_app(scenario="custom", z=at.query_params["z"][0] if isinstance(at.query_params["z"], list)
                    else at.query_params["z"])
    again.run()
    assert not again.exception and again.session_state["custom_text"] == text


def test_scenario_comments_render_as_text_not_markup():
    text = "# Title\n# ![x](http://example.invalid/a.png) [link](http://example.invalid)\nrequest r0: A\nrun\n"
    at = new_app(scenario="custom", text=text)
    at.run()
    assert not at.exception
    shown = "\n".join(m.value for m in at.markdown)
    assert "![x](" not in shown and "[link](" not in shown and "&#91;link&#93;" in shown


def test_lesson_url_with_a_superscript_line_is_ignored():
    at = AppTest.from_file(LESSONS_PAGE, default_timeout=60)
    at.query_params.update(lesson="01-kv-blocks", line="²")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["lesson_pos_01-kv-blocks"] == 0


def test_an_alias_bomb_lesson_does_not_take_down_the_lessons_page(tmp_path, monkeypatch):
    (tmp_path / "01-good.md").write_text((ROOT / "lessons" / "01-kv-blocks.md").read_text(encoding="utf-8"))
    for name, text in BAD_LESSONS.items():
        (tmp_path / f"02-{name}.md").write_text(text, encoding="utf-8")
    monkeypatch.setenv("PREFIXLAB_LESSONS_DIR", str(tmp_path))
    at = AppTest.from_file(LESSONS_PAGE, default_timeout=60).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.header[0].value == "Tokens, KV blocks and paged attention"
    shown = errors(at)
    assert all(f"02-{name}.md" in shown for name in BAD_LESSONS), shown
    assert "aliases" in shown


URL_VALUES = st.one_of(st.sampled_from(["", "²", "-1", "9" * 40, "custom", "design-doc", "classic", "1", "0"]),
                       st.text(max_size=40))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(["scenario", "text", "z", "sid", "step", "policy", "bs", "blocks", "block",
                                        "algo", "compare"]), URL_VALUES, max_size=6))
def test_random_lab_urls_never_show_a_traceback(params):
    at = new_app(**params)
    start = time.monotonic()
    at.run()
    assert not at.exception, (params, at.exception)
    assert time.monotonic() - start < 30


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(URL_VALUES, URL_VALUES)
def test_random_lesson_urls_never_show_a_traceback(lesson, line):
    at = AppTest.from_file(LESSONS_PAGE, default_timeout=60)
    at.query_params.update(lesson=lesson, line=line)
    at.run()
    assert not at.exception, (lesson, line, at.exception)
