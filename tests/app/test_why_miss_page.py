"""The "Why did it miss?" page in AppTest: presets, edits, verdict text and the token blocks' HTML."""

from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.conftest import page_path, run_page

PAGE = page_path("why_miss")


@pytest.fixture
def at() -> AppTest:
    return run_page("why_miss")


def headline(at: AppTest) -> str:
    shown = [s.value for s in at.success] + [w.value for w in at.warning]
    assert len(shown) == 1, shown
    return shown[0]


def pictures(at: AppTest) -> list[str]:
    """r1's and r2's token blocks: HTML drawn by the page (no Plotly chart, whose JS bundle left them blank)."""
    assert not at.get("plotly_chart")
    return [h.value for h in at.html if h.value.startswith("<div class='pl-tokens'>")]


def block_states(html: str) -> list[str]:
    return re.findall(r"<div class='tb-block' data-state='(\w+)'", html)


def block_labels(html: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", label) for label in re.findall(r"<div class='tb-label'>(.*?)</div>", html)]


def test_default_example(at: AppTest) -> None:
    assert headline(at) == "#### r2 would hit 2 blocks (8 of its 17 tokens): block 2 differs at token 11 ('dog' vs 'cat')."
    reasons = at.markdown[-1].value if "Last-token rule" in at.markdown[-1].value else next(
        m.value for m in at.markdown if "Last-token rule" in m.value)
    assert "(17 - 1) // 4 = 4 blocks" in reasons and "Block 4 (token 16) is partial" in reasons
    r1, r2 = pictures(at)
    assert block_states(r2) == ["hit"] * 2 + ["computed"] * 2 + ["partial"]
    assert "hit" not in block_states(r1)
    assert re.findall(r"<span class='tb-tok marked'[^>]*>([^<]*)</span>", r2) == ["cat"]  # the first differing token
    assert block_labels(r2)[4] == "◐ block 4 · no hash yet"
    table = at.dataframe[0].value
    assert list(table["same hash"]) == ["✓", "✓", "✗ first difference", "✗", "✗"]
    assert table["r1 hash"][0] == table["r2 hash"][0] and table["r1 hash"][2] != table["r2 hash"][2]


@pytest.mark.parametrize(
    ("preset", "expected"),
    [
        ("Same prompt, another cache salt", "the cache salt differs ('alice' vs 'bob')"),
        ("Same prompt, r2 uses a LoRA adapter", "the LoRA adapter differs (none vs 'sql-lora')"),
        ("Identical prompts (last-token rule)", "which is always recomputed"),
        ("r2 continues r1's conversation", "block 3 was partial in r1"),
    ],
)
def test_presets(at: AppTest, preset: str, expected: str) -> None:
    at.selectbox(key="wm_preset").set_value(preset).run()
    assert not at.exception and expected in headline(at)


def test_last_token_block_is_labelled_cached_but_not_used(at: AppTest) -> None:
    at.selectbox(key="wm_preset").set_value("Identical prompts (last-token rule)").run()
    labels = block_labels(pictures(at)[1])
    assert labels[2].endswith("· cached, not used") and "cached" not in labels[1]
    assert any("nothing is outlined" in c.value for c in at.caption)


def test_salt_differences_show_in_the_extra_keys_column(at: AppTest) -> None:
    at.text_input(key="wm_r2_salt").set_value("bob").run()
    assert "hit 0 blocks" in headline(at)
    table = at.dataframe[0].value
    assert table["r2 extra keys"][0] == "cache salt 'bob'" and table["r2 extra keys"][1] == "none"
    assert list(table["same hash"])[0] == "✗ first difference"


def test_editing_a_prompt_and_the_block_size(at: AppTest) -> None:
    at.text_area(key="wm_r2_prompt").set_value(at.text_area(key="wm_r1_prompt").value).run()
    # Identical 17-token prompts: all 4 full blocks hit, token 16 sits alone in a partial block.
    assert "hit 4 blocks" in headline(at) and "the last token sits in a partial block" in headline(at)
    at.number_input(key="wm_block_size").set_value(1).run()
    assert "r2 would hit 16 blocks" in headline(at)  # (17 - 1) // 1: the last token is recomputed
    assert "always recomputed" in headline(at)


def test_bad_input_is_a_message(at: AppTest) -> None:
    at.text_area(key="wm_r2_prompt").set_value("  ").run()
    assert not at.exception
    assert at.error[0].value == "r2: The prompt is empty: type some text."


def test_defaults_follow_the_apps_sidebar_settings_when_present() -> None:
    app = AppTest.from_file(PAGE, default_timeout=60)
    app.session_state["cfg_hash_algo"] = "xxhash"
    app.session_state["cfg_block_size"] = None  # "from the scenario": this page falls back to 4
    app.run()
    assert not app.exception
    assert app.selectbox(key="wm_algo").value == "xxhash" and app.number_input(key="wm_block_size").value == 4
