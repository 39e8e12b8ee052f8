"""The Why did it miss? page's state without Streamlit: presets fill the fields, run gives the engine's verdict."""

from __future__ import annotations

from teaching.pages.why_miss_session import FIELDS, PRESETS, WhyMissSession
from viz.why_miss import block_label, block_states, hash_rows


def test_a_new_session_holds_the_first_preset_and_its_verdict() -> None:
    wm = WhyMissSession()
    assert wm.preset == "One word differs" and tuple(getattr(wm, f) for f in FIELDS) == PRESETS[wm.preset]
    result = wm.run()
    assert result is not None and wm.error is None
    assert result.num_hit_blocks == 2 and "hit 2 blocks" in wm.explanation().headline
    assert [r["same hash"] for r in hash_rows(result)] == ["✓", "✓", "✗ first difference", "✗", "✗"]


def test_presets_replace_the_fields_and_edits_change_the_verdict() -> None:
    wm = WhyMissSession()
    wm.load_preset("Same prompt, another cache salt")
    assert (wm.r1_salt, wm.r2_salt) == ("alice", "bob")
    assert wm.run() is not None and "the cache salt differs ('alice' vs 'bob')" in wm.explanation().headline
    wm.r2_salt = "alice"
    assert wm.run() is not None and wm.result is not None and wm.result.num_hit_blocks > 0


def test_the_last_token_block_is_cached_but_not_used() -> None:
    wm = WhyMissSession(preset="Identical prompts (last-token rule)")
    assert wm.r1_prompt == wm.r2_prompt == "a b c d e f g h i j k l"
    result = wm.run()
    assert result is not None
    assert block_states(result.probe, True) == ["hit", "hit", "computed"]
    labels = [block_label(b, True) for b in result.probe.blocks]
    assert str(labels[2]).endswith("· cached, not used") and "cached" not in str(labels[1])


def test_bad_input_is_an_error_and_no_result() -> None:
    wm = WhyMissSession()
    assert wm.run() is not None
    wm.r2_prompt = "  "  # the last verdict does not linger under the error
    assert wm.run() is None and wm.result is None and wm.error == "r2: The prompt is empty: type some text."
