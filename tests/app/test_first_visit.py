"""A first visit: it lands on something that teaches, and the lab opens on a scenario that evicts."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from engine.events import BlockRemoved
from teaching.scenarios.library import BUILTIN_SCENARIOS, builtin_titles
from tests.app.conftest import APP, TIMEOUT, player


def test_a_first_visit_lands_on_lesson_1_not_the_lab() -> None:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not at.exception, at.exception
    assert at.title[0].value == "Lessons"
    assert at.selectbox(key="_w_lessons_pick").value == "01-kv-blocks"


def test_the_lab_opens_on_a_scenario_that_evicts_under_the_default_rule() -> None:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.switch_page("app_pages/lab.py").run()
    assert not at.exception, at.exception
    source = at.session_state["lab_source"]
    run = at.session_state["_lab_runs"]
    played = next(iter(run.values())).runs[at.sidebar.radio[0].value]
    assert at.sidebar.radio[0].value == "vllm"
    assert any(isinstance(e, BlockRemoved) for e in played.events), f"{source} never evicts under vllm"
    assert player(at)["data"]["jumps"]["eviction"], "the player offers no eviction to jump to"
    assert source in BUILTIN_SCENARIOS


def test_scenario_titles_are_written_for_students() -> None:
    for title in builtin_titles().values():
        assert "SPEC" not in title and "section" not in title, title


def test_pages_that_ignore_the_sidebar_settings_do_not_show_them() -> None:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()  # lessons
    assert not at.sidebar.number_input and not at.sidebar.radio
    at.switch_page("app_pages/hash_chain.py").run()
    assert not at.exception and not at.sidebar.number_input
    at.switch_page("app_pages/lab.py").run()
    assert at.sidebar.number_input and at.sidebar.radio
