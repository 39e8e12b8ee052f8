"""The animated hash chain figure, checked on its data (frames, colours, texts)."""

from __future__ import annotations

import pytest

from teaching.prefix_probe import ProbeResult, RequestSpec, probe_prefix_cache
from viz.hash_chain import PENDING_FILL, changed_blocks, hash_chain_figure, lookup_text
from viz.theme import OUTLINES, STATE_COLORS

R1 = "system : you are a helpful tutor . user : my dog ate my homework , what should I do now ?"
R2 = R1.replace("my dog", "my cat")  # token 11, in block 2 (block size 4)


def probe(r2: RequestSpec | None = None, block_size: int = 4) -> ProbeResult:
    return probe_prefix_cache(RequestSpec(R1), r2 or RequestSpec(R2), block_size=block_size)


def r2_bars(fig):  # type: ignore[no-untyped-def]
    return fig.data[1]


def test_one_frame_per_hashed_block_plus_the_start() -> None:
    result = probe()
    fig = hash_chain_figure(result.cached.blocks, result.probe.blocks, none_hash=result.none_hash)
    assert [f.name for f in fig.frames] == ["0", "1", "2", "3", "4", "5"]
    assert all(list(f.traces) == [1, 2, 3, 4] for f in fig.frames)
    assert all(f.layout.xaxis.range is None for f in fig.frames)  # frames never move the axes
    assert tuple(fig.layout.xaxis.range) == (-0.1, 14.0) and fig.layout.yaxis.range is not None
    assert fig.layout.xaxis.fixedrange and fig.layout.yaxis.fixedrange
    assert len(fig.layout.sliders[0].steps) == 6 and fig.layout.sliders[0].active == 5
    assert [b.label for b in fig.layout.updatemenus[0].buttons] == ["▶ Play", "❚❚ Pause"]


def test_final_state_colours_hits_misses_and_the_partial_tail() -> None:
    result = probe()
    fig = hash_chain_figure(result.cached.blocks, result.probe.blocks)
    colors = list(r2_bars(fig).marker.color)
    assert colors == [STATE_COLORS["hit"]] * 2 + [STATE_COLORS["computed"]] * 3 + [STATE_COLORS["partial"]]
    assert list(fig.data[2].text) == ["✓ hit: block #1", "✓ hit: block #2", "✗ miss", "✗ miss", "✗ miss", "never hashed"]
    assert "partial: never hashed" in r2_bars(fig).text[5]
    assert set(fig.data[0].marker.color) == {STATE_COLORS["cached_free"], STATE_COLORS["partial"]}


def test_every_hash_after_the_edit_is_highlighted() -> None:
    result = probe()
    fig = hash_chain_figure(result.cached.blocks, result.probe.blocks)
    assert changed_blocks(result.cached.blocks, result.probe.blocks) == [2, 3, 4]
    lines = list(r2_bars(fig).marker.line.color)
    assert [c == OUTLINES["differs"].color for c in lines] == [False, False, True, True, True, False]


def test_step_zero_hides_every_hash_and_frames_reveal_one_block_each() -> None:
    result = probe()
    fig = hash_chain_figure(result.cached.blocks, result.probe.blocks, step=0, none_hash=result.none_hash)
    assert list(r2_bars(fig).marker.color)[:5] == [PENDING_FILL] * 5
    assert all("#????????" in t for t in list(r2_bars(fig).text)[:5])
    assert "NONE_HASH = " + result.none_hash.hex()[:8] in fig.data[4].text[0]
    for k, frame in enumerate(fig.frames):
        revealed = [c != PENDING_FILL for c in frame.data[0].marker.color][:5]
        assert revealed == [i < k for i in range(5)]
    bars, lookups, labels, formula = fig.frames[3].data  # three blocks hashed: block 2 is the current one
    assert lookups.text[2] == "✗ miss" and lookups.text[3] == ""
    assert labels.text[2].startswith("▶") and not labels.text[1].startswith("▶")
    assert f"#{result.probe.blocks[2].block_hash.hex()[:8]}" in bars.text[2]
    assert "block 2</b> = H( parent #" + result.probe.blocks[1].block_hash.hex()[:8] in formula.text[0]


def test_step_is_clamped() -> None:
    result = probe()
    fig = hash_chain_figure(result.cached.blocks, result.probe.blocks, step=99)
    assert fig.layout.sliders[0].active == 5


def test_short_hash_in_the_box_full_hash_on_hover() -> None:
    result = probe()
    fig = hash_chain_figure(result.cached.blocks, result.probe.blocks)
    block = result.probe.blocks[2]
    assert f"#{block.block_hash.hex()[:8]}" in r2_bars(fig).text[2]
    assert block.block_hash.hex() not in r2_bars(fig).text[2]
    assert block.block_hash.hex() in r2_bars(fig).hovertext[2]
    assert block.parent_hash.hex() in r2_bars(fig).hovertext[2]


def test_salt_is_an_extra_key_of_block_zero_only_but_changes_every_hash() -> None:
    result = probe(RequestSpec(R1, cache_salt="s1"))
    fig = hash_chain_figure(result.cached.blocks, result.probe.blocks)
    texts = list(r2_bars(fig).text)
    assert "salt s1" in texts[0] and not any("salt" in t for t in texts[1:])
    assert changed_blocks(result.cached.blocks, result.probe.blocks) == [0, 1, 2, 3, 4]
    assert lookup_text(result.probe.blocks[0]) == "✗ miss"


def test_lora_is_an_extra_key_of_every_block() -> None:
    result = probe(RequestSpec(R1, lora_name="sql"))
    fig = hash_chain_figure(result.cached.blocks, result.probe.blocks)
    assert all("lora sql" in t for t in list(r2_bars(fig).text)[:5])
    assert "lora" not in r2_bars(fig).text[5]  # the partial tail is never hashed


@pytest.mark.parametrize("block_size", [1, 3, 8, 30])
def test_any_block_size_draws(block_size: int) -> None:
    result = probe(block_size=block_size)
    fig = hash_chain_figure(result.cached.blocks, result.probe.blocks)
    assert len(fig.frames) == len(result.probe.full_blocks) + 1
    assert len(r2_bars(fig).y) == len(result.probe.blocks)


def test_identical_prompt_last_block_is_left_out_by_the_last_token_rule() -> None:
    prompt = "a b c d e f g h"
    result = probe_prefix_cache(RequestSpec(prompt), RequestSpec(prompt), block_size=4)
    fig = hash_chain_figure(result.cached.blocks, result.probe.blocks)
    assert list(fig.data[2].text) == ["✓ hit: block #1", "in table: last-token rule"]
    assert changed_blocks(result.cached.blocks, result.probe.blocks) == []
