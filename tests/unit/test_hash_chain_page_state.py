"""The Hash chain page's state without Streamlit: run the probe, name what changed, keep the seed."""

from __future__ import annotations

from teaching.pages.hash_chain import OTHER, TOKEN_IDS, HashChainPage


def test_the_default_edit_changes_every_later_hash() -> None:
    hc = HashChainPage()
    result = hc.run()
    assert result is not None and hc.error is None
    assert len(result.probe.full_blocks) == 5 and result.num_hit_blocks == 2 and hc.changed() == [2, 3, 4]
    notes = hc.notes()
    assert "token 11 changed from 'dog' to 'cat': it sits in block 2." in notes[0]
    assert "from block 2 on (3 of 5)" in notes[1] and "partial block is never hashed" in notes[-1]
    rows = hc.full_hash_rows()
    assert len(rows) == 6 and rows[0]["r1 hash"] == rows[0]["r2 hash"] and rows[5]["r2 hash"] == "never hashed"


def test_another_prompt_with_a_salt_differs_from_block_0() -> None:
    hc = HashChainPage(how=OTHER, r2_salt="alice")
    assert hc.run() is not None
    assert hc.changed() == [0, 1, 2, 3, 4]
    assert any("block 0 only" in n for n in hc.notes()) and not any("changed from" in n for n in hc.notes())


def test_bad_token_ids_name_the_request_and_leave_no_result() -> None:
    hc = HashChainPage(mode=TOKEN_IDS, prompt="1 2 x 4")
    assert hc.run() is None and hc.result is None and str(hc.error).startswith("r1:")
    hc.prompt = "1 2 3 4 5 6 7 8"
    hc.edit_pos, hc.edit_new = 500, "9"
    assert hc.run() is None and "outside the prompt" in str(hc.error)


def test_an_xxhash_seed_is_kept_until_a_new_one_is_asked_for() -> None:
    hc = HashChainPage(algo="xxhash")
    first = hc.run()
    assert first is not None
    again = hc.run()
    assert again is not None and again.none_hash == first.none_hash
    hc.new_seed()
    fresh = hc.run()
    assert fresh is not None and fresh.none_hash != first.none_hash
    hc.seed_text = "42"
    assert hc.seed() == ("42", "given by you")
