"""The scenario editor: good text goes to the lab, bad text names the line and stays."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.app.conftest import new_app, player_args


def editor() -> AppTest:
    at = new_app()
    at.switch_page("app_pages/scenario_editor.py")
    at.run()
    assert not at.exception, at.exception
    return at


def test_editor_starts_with_the_design_doc_example() -> None:
    at = editor()
    assert "request r0:" in at.text_area[0].value


def test_bad_text_names_the_line_and_keeps_the_text() -> None:
    at = editor()
    bad = "blocks 11\nblock_size 4\nrequest r0 A B C D\nstep"
    at.text_area[0].set_value(bad).run()
    at.button(key="editor_run").click().run()
    assert not at.exception
    assert at.error and at.error[0].value.startswith("Line 3:")
    assert at.text_area[0].value == bad
    assert at.session_state["lab_source"] != "custom"


def test_check_reports_a_summary() -> None:
    at = editor()
    at.button(key="editor_check").click().run()
    assert at.success and "3 requests" in at.success[0].value


def test_run_error_at_play_time_names_the_line() -> None:
    at = editor()
    at.text_area[0].set_value("blocks 3\nblock_size 2\nrequest big: a b c d e f g | max_tokens=3\nrun").run()
    at.button(key="editor_run").click().run()
    assert at.error and at.error[0].value.startswith("Line 3:")


def test_good_text_runs_in_the_lab() -> None:
    at = editor()
    text = "# My test\nblocks 6\nblock_size 2\nrequest a: x y z | output=w\nrequest b: x y q | output=v\nrun"
    at.text_area[0].set_value(text).run()
    at.button(key="editor_run").click().run()
    assert not at.exception
    assert at.session_state["lab_source"] == "custom"
    assert at.session_state["custom_text"] == text
    # The lab now plays it (switch_page moved there, or open it explicitly).
    at.switch_page("app_pages/lab.py").run()
    assert not at.exception
    assert at.selectbox(key="_w_lab_source").value == "custom"
    (player,) = [e for e in at.get("component_instance") if "lab_player" in e.proto.component_name]
    last = player_args(player.proto)["data"]["frames"][-1]
    assert "b is finished" in last["card"]["body"]


def test_load_builtin_replaces_the_text() -> None:
    at = editor()
    at.selectbox(key="_w_editor_template").set_value("preemption").run()
    at.button(key="editor_load").click().run()
    assert "output=a b c d e f g h" in at.text_area[0].value


def test_check_plays_the_scenario_so_a_too_small_pool_is_caught_there() -> None:
    """Check must not say "Looks good" for text that "Run in the lab" then refuses."""
    at = editor()
    text = "blocks 3\nblock_size 4\nrequest r0: a b c d e f g h | max_tokens=2\nrun"
    at.text_area[0].set_value(text).run()
    at.button(key="editor_check").click().run()
    assert not at.success
    assert at.error and at.error[0].value.startswith("Line 3:") and "KV slots" in at.error[0].value
