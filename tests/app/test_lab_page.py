"""The lab page driven through its widgets, asserting on what it hands the browser player.

The player (ui/lab_player) plays the timeline client-side; here we check the data it gets
(every state, the jumps, the alignment in compare mode, the predict questions) and the
server-side modes (projector, URL). tests/e2e/test_lab_player.py checks the player itself in chromium.
"""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from engine.vllm_versions import FREE_POLICY_VERSIONS
from teaching.scenarios.library import DEFAULT_SCENARIO
from tests.app.conftest import markdown_text, new_app, player


def click(at: AppTest, key: str) -> AppTest:
    at.button(key=key).click().run()
    assert not at.exception, at.exception
    return at


def test_lab_sends_the_whole_timeline_once(lab: AppTest) -> None:
    args = player(lab)
    frames = args["data"]["frames"]
    assert args["step"] == 0 and len(frames) == 40  # the design-doc example: 39 events
    assert frames[0]["fq"] == list(range(1, 11)) and frames[0]["card"]["tag"] == "START"
    assert frames[1]["card"]["body"].startswith("r0 arrives with a 15-token prompt")
    assert frames[4]["ref"][1:6] == [1, 1, 1, 1, 0] and frames[4]["fq"] == [5, 6, 7, 8, 9, 10]
    assert frames[4]["touched"] == [1, 2, 3, 4] and frames[4]["kind"] == "allocate"
    assert frames[4]["tables"] == [["r0", "waiting", [1, 2, 3, 4], ["partial"] * 4]]  # new: not full yet
    assert "r0 releases blocks 5, 4, 3, 2 and 1" in frames[22]["card"]["body"]
    assert frames[22]["fq"] == [5, 8, 9, 10, 4, 3]
    assert all(len(h) == 8 for f in frames for h in f["hash"] if h)  # one hash length
    assert args["theme"]["glyph"]["hit"] == "✓" and not args["projector"] and not args["predict"]
    assert not lab.error


def test_jumps_to_eviction_in_classic() -> None:
    at = new_app(policy="classic")
    at.run()
    data = player(at)["data"]
    (evict,) = data["jumps"]["eviction"]
    after = data["frames"][evict]
    assert "Block 4 is evicted" in after["card"]["body"] and after["evictions"] == 1
    assert after["hash"][4] is None and after["evicted"] == [4]
    assert data["frames"][evict - 1]["hash"][4] is not None


def test_vllm_has_no_eviction_in_the_design_doc_example(lab: AppTest) -> None:
    data = player(lab)["data"]
    assert data["jumps"]["eviction"] == []
    first_hit = data["jumps"]["hit"][0]
    assert "r1 takes the cached blocks 1 and 2" in data["frames"][first_hit]["card"]["body"]
    hit_table = dict((t[0], t[3]) for t in data["frames"][first_hit]["tables"])
    assert hit_table["r1"][:2] == ["hit", "hit"]


def test_switch_scenario_resets_the_position() -> None:
    at = new_app(step="5")
    at.run()
    assert player(at)["step"] == 5
    at.selectbox(key="_w_lab_source").set_value("preemption").run()
    assert not at.exception
    assert at.session_state["lab_pos"] == 0 and player(at)["step"] == 0
    data = player(at)["data"]
    assert any("is preempted" in data["frames"][i]["card"]["body"] for i in data["jumps"]["preemption"])


def test_the_step_comes_back_when_playback_rests(lab: AppTest) -> None:
    lab.session_state["lab_player"] = {"step": 12, "block": 3, "nonce": 1}
    lab.run()
    assert lab.session_state["lab_pos"] == 12 and lab.session_state["lab_block"] == 3
    assert lab.query_params["step"] in (["12"], "12") and lab.query_params["block"] in (["3"], "3")
    assert player(lab)["step"] == 12
    lab.session_state["lab_pos"] = 2  # a later server-side move is not undone by the old value
    lab.run()
    assert player(lab)["step"] == 2


def test_compare_sends_both_policies_aligned() -> None:
    at = new_app(step="35", policy="classic")
    at.run()
    at.toggle(key="_w_lab_compare").set_value(True).run()
    assert not at.exception
    args = player(at)
    assert args["labels"] == [FREE_POLICY_VERSIONS["classic"], FREE_POLICY_VERSIONS["vllm"]]
    align = args["other"]["align"]
    assert len(align) == len(args["data"]["frames"])
    classic, vllm = args["data"]["frames"][35], args["other"]["data"]["frames"][align[35]]
    # classic just gave block 4 to r2 and evicted it (allocation logged first); vllm, at the same point, still has A..P cached in block 4.
    assert classic["hash"][4] is None and vllm["hash"][4] is not None
    assert classic["fq"] != vllm["fq"]


def test_projector_mode_from_the_url() -> None:
    at = new_app(projector="1")
    at.run()
    assert player(at)["projector"]
    assert at.toggle(key="_w_projector").value  # the app-wide switch (ui.projector)
    assert "stSidebar" in markdown_text(at)  # the projector CSS hides it
    assert at.query_params["projector"] in (["1"], "1")


def test_predict_the_victim_questions_go_to_the_player_with_their_answers() -> None:
    """The questions, the right answer and every verdict are computed here and sent once; the player asks them."""
    at = new_app(scenario="design-doc", policy="classic")
    at.run()
    assert not player(at)["predict"]
    at.toggle(key="_w_lab_predict").set_value(True).run()
    assert not at.exception
    args = player(at)
    assert args["predict"] and args["step"] == 0  # the server does not move or lock the player
    (question,) = args["data"]["questions"]
    assert question["answer"] == 4 and question["queue"] == args["data"]["frames"][question["ask_at"]]["fq"]
    assert args["data"]["frames"][question["reveal_at"]]["evictions"] == 1
    assert question["text"].startswith("r2 is about to take")
    assert question["right"].startswith("Right! Block 4 is evicted.")
    assert question["wrong"].startswith("Not quite: you picked {guess}, but block 4 is evicted.")  # the player fills in
    assert "the first one still holding a hash is evicted" in question["wrong"]
    assert at.query_params["predict"] in (["1"], "1")


def test_predict_without_eviction_sends_no_question(lab: AppTest) -> None:
    lab.toggle(key="_w_lab_predict").set_value(True).run()
    assert player(lab)["predict"] and player(lab)["data"]["questions"] == []  # the player says so


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


def test_predict_questions_follow_one_another() -> None:
    at = new_app(scenario="eviction-pressure", predict="1")
    at.run()
    first, second = player(at)["data"]["questions"]
    assert at.toggle(key="_w_lab_predict").value
    assert first["reveal_at"] <= second["ask_at"]


def test_hash_algorithm_changes_the_hashes() -> None:
    lab = new_app(step="10")
    lab.run()
    before = player(lab)["data"]["frames"][10]["hashes"]
    lab.selectbox(key="_w_cfg_hash_algo").set_value("sha256_cbor").run()
    assert not lab.exception
    after = player(lab)["data"]["frames"][10]["hashes"]
    assert len(before) == len(after) and before != after
