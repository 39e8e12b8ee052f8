"""The Hash chain page in AppTest: drive its widgets, read its text and the chain's HTML."""

from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.conftest import page_path, run_page

PAGE = page_path("hash_chain")


@pytest.fixture
def at() -> AppTest:
    return run_page("hash_chain")


def chain(at: AppTest) -> str:
    """The chain's HTML: drawn by the page itself, no Plotly figure (whose JS bundle left it blank)."""
    assert not at.get("plotly_chart")
    bodies = [h.value for h in at.html if h.value.startswith("<div class='pl-chain'>")]
    assert len(bodies) == 1
    return bodies[0]


def r2_tiles(at: AppTest) -> list[str]:
    """Each r2 tile's opening tag and text, in block order."""
    return re.findall(r"<div class='hc-tile r2.*?</div>", chain(at), re.S)


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def r2_hashes(at: AppTest) -> list[str]:
    return re.findall(r"<b class='h'>#([0-9a-f]{8})</b>", "".join(r2_tiles(at)))


def test_default_edit_changes_every_later_hash(at: AppTest) -> None:
    assert at.title[0].value == "Hash chain"
    assert metrics(at) == {"r2 blocks hashed": "5", "hashes that differ from r1": "3", "blocks r2 hits": "2"}
    assert len(re.findall(r"id='hc-s\d+'", chain(at))) == 6
    assert ["differs" in t.split("'")[1] for t in r2_tiles(at)] == [False, False, True, True, True, False]
    assert "vllm-none-hash" in at.info[0].value and "fixed default for sha256" in at.info[0].value
    assert any("from block 2 on (3 of 5)" in m.value for m in at.markdown)
    assert any("token 11 changed from 'dog' to 'cat': it sits in block 2" in m.value for m in at.markdown)
    assert any("partial block is never hashed" in m.value for m in at.markdown)


def test_editing_an_earlier_token_changes_more_hashes(at: AppTest) -> None:
    at.number_input(key="hc_edit_pos").set_value(1).run()
    assert metrics(at)["hashes that differ from r1"] == "5"
    assert metrics(at)["blocks r2 hits"] == "0"
    at.text_input(key="hc_edit_new_words").set_value(":").run()  # the same token again: nothing changes
    assert metrics(at)["hashes that differ from r1"] == "0"


def test_algorithm_and_seed(at: AppTest) -> None:
    sha = r2_hashes(at)
    at.selectbox(key="hc_algo").set_value("xxhash").run()
    assert "random per process" in at.info[0].value
    xx = r2_hashes(at)
    assert xx != sha and len(xx) == 5
    at.run()  # a rerun keeps this session's random seed: the picture stays put
    assert r2_hashes(at) == xx
    at.text_input(key="hc_seed").set_value("42").run()
    assert "given by you" in at.info[0].value and r2_hashes(at) != xx
    at.selectbox(key="hc_algo").set_value("sha256_cbor").run()
    assert not at.exception and r2_hashes(at) not in (sha, xx)


def test_salt_changes_only_block_zeros_extra_keys_but_every_hash(at: AppTest) -> None:
    at.text_input(key="hc_r2_salt").set_value("alice").run()
    assert metrics(at)["hashes that differ from r1"] == "5"
    texts = r2_tiles(at)
    assert "salt alice" in texts[0] and not any("salt" in t for t in texts[1:])
    assert any("block 0 only" in m.value for m in at.markdown)


def test_lora_is_on_every_block(at: AppTest) -> None:
    at.text_input(key="hc_r2_lora").set_value("sql").run()
    texts = r2_tiles(at)
    assert all("lora sql" in t for t in texts[:5])
    assert any("every block" in m.value for m in at.markdown)


def test_block_size(at: AppTest) -> None:
    at.number_input(key="hc_block_size").set_value(8).run()
    assert metrics(at)["r2 blocks hashed"] == "2" and metrics(at)["blocks r2 hits"] == "1"
    assert len(re.findall(r"id='hc-s\d+'", chain(at))) == 3


def test_one_slider_for_one_thing(at: AppTest) -> None:
    """The chain's own step buttons (and Play) step through the blocks in the browser; no server-side slider."""
    assert not at.slider
    assert len(re.findall(r"name='hc-step'", chain(at))) == 7  # Play, then 0..5 blocks hashed
    explained = [m.value for m in at.markdown if "**Block 0** = H(parent" in m.value]
    assert explained and explained[0].count("**Block") == 5  # every full block of r2, in words


def test_extra_keys_read_as_words_not_python_tuples(at: AppTest) -> None:
    at.text_input(key="hc_r2_lora").set_value("math").run()
    at.text_input(key="hc_r2_salt").set_value("alice").run()
    text = "\n".join(m.value for m in at.markdown)
    assert "LoRA adapter 'math'" in text and "(('lora'" not in text and "None)" not in text
    table = at.dataframe[0].value
    assert "cache salt 'alice'" in table["r2 extra keys"][0] and "('" not in "".join(table["r2 extra keys"])


def test_token_ids_mode_and_bad_ids(at: AppTest) -> None:
    at.radio(key="hc_mode").set_value("token ids").run()
    assert not at.exception and not at.error and metrics(at)["r2 blocks hashed"] == "3"
    at.text_area(key="hc_prompt_token ids").set_value("1 2 x 4").run()
    assert not at.exception
    assert "r1: Token 2 is 'x'" in at.error[0].value


def test_out_of_range_edit_is_a_message_not_a_traceback(at: AppTest) -> None:
    at.number_input(key="hc_edit_pos").set_value(500).run()
    assert not at.exception and "outside the prompt" in at.error[0].value


def test_another_prompt(at: AppTest) -> None:
    at.radio(key="hc_how").set_value("another prompt").run()
    at.text_area(key="hc_prompt2_words").set_value("system : you are a helpful tutor .").run()
    assert metrics(at)["blocks r2 hits"] == "1"  # 8 tokens: the last-token rule leaves block 1 out


def test_long_prompts_draw_a_bounded_figure(at: AppTest) -> None:
    at.text_area(key="hc_prompt_words").set_value("x " * 200).run()
    at.number_input(key="hc_block_size").set_value(1).run()
    assert not at.exception and metrics(at)["r2 blocks hashed"] == "200"
    assert "first 32 blocks only" in at.warning[0].value
    assert len(r2_tiles(at)) == 32 and len(re.findall(r"id='hc-s\d+'", chain(at))) == 33


def test_defaults_follow_the_apps_sidebar_settings_when_present() -> None:
    app = AppTest.from_file(PAGE, default_timeout=60)
    app.session_state["cfg_hash_algo"] = "sha256_cbor"
    app.session_state["cfg_block_size"] = 8
    app.run()
    assert not app.exception
    assert app.selectbox(key="hc_algo").value == "sha256_cbor" and app.number_input(key="hc_block_size").value == 8
