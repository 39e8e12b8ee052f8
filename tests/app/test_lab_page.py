"""The lab page driven through its widgets, asserting on what is shown (figures included)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from teaching.scenario_library import DEFAULT_SCENARIO
from tests.app.conftest import figure, figures, markdown_text, new_app, shape
from viz.theme import STATE_COLORS


def click(at: AppTest, key: str) -> AppTest:
    at.button(key=key).click().run()
    assert not at.exception, at.exception
    return at


def test_lab_loads_with_the_design_doc_example(lab: AppTest) -> None:
    assert lab.session_state["lab_pos"] == 0
    assert len(figures(lab)) == 4
    grid = figure(lab, "Physical KV blocks")
    assert shape(grid, "block-0")["fillcolor"] == STATE_COLORS["null"]
    assert all(shape(grid, f"block-{i}")["fillcolor"] == STATE_COLORS["free"] for i in range(1, 11))
    queue = figure(lab, "Free queue")
    assert [c[0] for c in queue["data"][0]["customdata"]] == list(range(1, 11))
    assert "Nothing has happened yet" in markdown_text(lab)
    assert not lab.error


def test_step_forward_and_back(lab: AppTest) -> None:
    click(lab, "nav_forward")
    assert lab.session_state["lab_pos"] == 1
    assert "r0 arrives with a 15-token prompt" in markdown_text(lab)
    for _ in range(3):
        click(lab, "nav_forward")
    assert lab.session_state["lab_pos"] == 4
    grid = figure(lab, "Physical KV blocks")  # r0 got blocks 1-4
    assert [shape(grid, f"block-{i}")["fillcolor"] for i in (1, 4, 5)] == [
        STATE_COLORS["in_use"], STATE_COLORS["in_use"], STATE_COLORS["free"]]
    click(lab, "nav_back")
    assert lab.session_state["lab_pos"] == 3
    grid = figure(lab, "Physical KV blocks")
    assert shape(grid, "block-1")["fillcolor"] == STATE_COLORS["free"]
    assert lab.slider[0].value == 3
    click(lab, "nav_end")
    assert lab.session_state["lab_pos"] == 39
    click(lab, "nav_start")
    assert lab.session_state["lab_pos"] == 0


def test_slider_moves_the_position(lab: AppTest) -> None:
    lab.slider[0].set_value(22).run()
    assert lab.session_state["lab_pos"] == 22
    assert "r0 releases blocks 5, 4, 3, 2 and 1" in markdown_text(lab)
    queue = figure(lab, "Free queue")
    assert [c[0] for c in queue["data"][0]["customdata"]] == [5, 8, 9, 10, 4, 3]


def test_jump_to_next_eviction_in_classic() -> None:
    at = new_app(policy="classic")
    at.run()
    assert at.sidebar.radio[0].value == "classic"
    click(at, "nav_next_eviction")
    pos = at.session_state["lab_pos"]
    assert "Block 4 is evicted" in markdown_text(at)
    assert "evictions so far <b>1</b>" in markdown_text(at)
    grid = figure(at, "Physical KV blocks")
    # Popped for r2 first, then evicted: in use by r2, its hash gone.
    assert shape(grid, "block-4")["fillcolor"] == STATE_COLORS["in_use"]
    assert at.button(key="nav_next_eviction").disabled  # no second eviction
    assert at.button(key="nav_next_hit").disabled  # and no hit after it
    assert at.session_state["lab_pos"] == pos


def test_vllm_has_no_eviction_in_the_design_doc_example(lab: AppTest) -> None:
    assert lab.button(key="nav_next_eviction").disabled
    click(lab, "nav_next_hit")
    assert "r1 takes the cached blocks 1 and 2" in markdown_text(lab)


def test_switch_scenario_resets_the_position(lab: AppTest) -> None:
    click(lab, "nav_forward")
    lab.selectbox(key="_w_lab_source").set_value("preemption").run()
    assert not lab.exception
    assert lab.session_state["lab_pos"] == 0
    click(lab, "nav_next_preemption")
    assert "is preempted" in markdown_text(lab)


def test_compare_shows_both_policies_at_the_same_step() -> None:
    at = new_app(step="35", policy="classic")
    at.run()
    at.toggle(key="_w_lab_compare").set_value(True).run()
    assert not at.exception
    assert len(figures(at)) == 8
    classic_grid, vllm_grid = figure(at, "Physical KV blocks", 0), figure(at, "Physical KV blocks", 1)
    # classic just gave block 4 to r2 and evicted it; vllm, at the same point, still has A..P cached in block 4.
    assert shape(classic_grid, "block-4")["fillcolor"] == STATE_COLORS["in_use"]
    assert shape(vllm_grid, "block-4")["fillcolor"] == STATE_COLORS["cached_free"]
    text = markdown_text(at)
    assert "#### classic" in text and "#### vllm" in text


def test_highlight_a_block_everywhere(lab: AppTest) -> None:
    lab.slider[0].set_value(29).run()
    lab.selectbox(key="_w_lab_block").set_value(4).run()
    assert lab.session_state["lab_block"] == 4
    grid = figure(lab, "Physical KV blocks")
    assert shape(grid, "block-4")["line"]["color"] == STATE_COLORS["highlight"]
    assert shape(figure(lab, "Free queue"), "node-4")["line"]["color"] == STATE_COLORS["highlight"]
    table = figure(lab, "Hash table")["data"][0]["cells"]
    row = table["values"][1].index("4")
    assert table["fill"]["color"][0][row] == STATE_COLORS["highlight"]


def test_predict_the_victim_right_and_wrong() -> None:
    at = new_app(scenario="design-doc", policy="classic")
    at.run()
    at.toggle(key="_w_lab_predict").set_value(True).run()
    assert not at.exception
    question = at.session_state["lab_q"]
    assert question.answer == 4 and at.session_state["lab_pos"] == question.ask_at
    assert "Predict the victim" in markdown_text(at)
    assert at.button(key="predict_reveal").disabled  # no guess yet
    at.button_group[0].set_value(8).run()
    click(at, "predict_reveal")
    assert at.error and "block 4 is evicted" in at.error[0].value
    assert at.session_state["lab_pos"] == question.reveal_at
    # Ask again from the start and answer right.
    at.toggle(key="_w_lab_predict").set_value(False).run()
    click(at, "nav_start")
    at.toggle(key="_w_lab_predict").set_value(True).run()
    at.button_group[0].set_value(4).run()
    click(at, "predict_reveal")
    assert at.success and "Right!" in at.success[0].value


def test_predict_without_eviction_says_so(lab: AppTest) -> None:
    lab.toggle(key="_w_lab_predict").set_value(True).run()
    assert any("No allocation ahead" in i.value for i in lab.info)


def test_url_restores_scenario_step_and_settings() -> None:
    at = new_app(scenario="eviction-pressure", step="12", policy="classic", bs="2", block="3")
    at.run()
    assert not at.exception
    assert at.session_state["lab_source"] == "eviction-pressure"
    assert at.session_state["lab_pos"] == 12
    assert at.sidebar.number_input[0].value == 2
    assert at.session_state["lab_block"] == 3
    assert at.query_params["step"] == ["12"] or at.query_params["step"] == "12"


def test_bad_url_values_are_ignored() -> None:
    at = new_app(scenario="nope", step="-4", policy="lru", bs="x")
    at.run()
    assert not at.exception and not at.error
    assert at.session_state["lab_source"] == DEFAULT_SCENARIO and at.session_state["lab_pos"] == 0


def test_settings_that_cannot_fit_show_an_error_not_a_traceback(lab: AppTest) -> None:
    lab.sidebar.number_input[1].set_value(3).run()  # 2 usable blocks: r2 needs 8
    assert not lab.exception
    assert lab.error and "Line" in lab.error[0].value


def test_autoplay_toggles(lab: AppTest) -> None:
    click(lab, "play")
    assert lab.session_state["lab_playing"]
    assert lab.session_state["lab_pos"] >= 1
    click(lab, "play")
    assert not lab.session_state["lab_playing"]


def test_predict_next_question_walks_through_evictions() -> None:
    at = new_app(scenario="eviction-pressure")
    at.run()
    at.toggle(key="_w_lab_predict").set_value(True).run()
    first = at.session_state["lab_q"]
    at.button_group[0].set_value(first.answer).run()
    click(at, "predict_reveal")
    assert "Right!" in at.success[0].value
    click(at, "predict_next")
    second = at.session_state["lab_q"]
    assert second is not None and second.ask_at > first.ask_at
    assert at.session_state["lab_pos"] == second.ask_at
    assert not at.session_state["lab_revealed"]


def test_highlight_a_hash_in_both_policies() -> None:
    at = new_app(step="30", compare="1")
    at.run()
    assert len(at.selectbox(key="_w_lab_hash").options) > 1
    hover = figure(at, "Physical KV blocks")["data"][0]["hovertext"][1]
    block1_hash = hover.split("hash: ")[1].split("<br>")[0]
    at.selectbox(key="_w_lab_hash").set_value(block1_hash).run()
    assert at.session_state["lab_hash"] == block1_hash
    for nth in (0, 1):  # both policies' grids outline the block holding it
        grid = figure(at, "Physical KV blocks", nth)
        outlined = [s["name"] for s in grid["layout"]["shapes"] if s["line"]["color"] == STATE_COLORS["highlight"]]
        assert outlined == ["block-1"]


def test_hash_algorithm_changes_the_hashes() -> None:
    lab = new_app(step="10")
    lab.run()
    before = figure(lab, "Hash table")["data"][0]["cells"]["values"][0]
    lab.selectbox(key="_w_cfg_hash_algo").set_value("sha256_cbor").run()
    assert not lab.exception
    after = figure(lab, "Hash table")["data"][0]["cells"]["values"][0]
    assert len(before) == len(after) and before != after
