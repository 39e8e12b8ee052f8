"""Why did it miss?'s pictures of a probe: each block's state and label, and both requests' hashes side by side.

Plain functions of a :class:`~teaching.pages.prefix_probe.ProbeResult`, drawn with
:func:`viz.tokens.token_blocks_html` and a table.
"""

from __future__ import annotations

from teaching.pages.prefix_probe import BlockTrace, ProbeResult, RequestTrace
from teaching.scenarios.describe import describe_extra_keys
from viz.hash_chain import short
from viz.tokens import token_blocks_html


def block_states(trace: RequestTrace, is_probe: bool) -> list[str]:
    """hit / computed / partial per block: hits are the engine's, r1 computed all of its blocks."""
    return [
        "partial" if not b.is_full else "hit" if is_probe and b.hit_block_id is not None else "computed"
        for b in trace.blocks
    ]


def block_label(block: BlockTrace, is_probe: bool) -> str | None:
    """Short hash above a block; r2's blocks that were cached but not used say so."""
    if not block.is_full:
        return None
    if is_probe and block.in_table and block.hit_block_id is None:
        return f"{short(block.block_hash)} · cached, not used"
    return short(block.block_hash)


def request_html(result: ProbeResult, is_probe: bool, title: str) -> str:
    """One request's tokens as blocks; the first token that differs between r1 and r2 is outlined."""
    trace = result.probe if is_probe else result.cached
    diff = result.first_diff_token
    return token_blocks_html(
        trace.tokens_text, result.block_size, block_states(trace, is_probe),
        [block_label(b, is_probe) for b in trace.blocks],
        hover_hashes=[b.block_hash.hex() if b.block_hash else None for b in trace.blocks],
        marked_tokens={diff} if diff is not None else set(), title=title,
    )


def hash_rows(result: ProbeResult) -> list[dict[str, object]]:
    """Both requests block by block: tokens, short hashes, extra keys, and whether the hashes agree."""
    rows: list[dict[str, object]] = []
    first_diff = result.first_diff_block
    for index in range(max(len(result.cached.blocks), len(result.probe.blocks))):
        a = result.cached.blocks[index] if index < len(result.cached.blocks) else None
        b = result.probe.blocks[index] if index < len(result.probe.blocks) else None
        rows.append({  # the verdict beside the block number: a narrow screen never scrolls it out of sight
            "block": index,
            "same hash": "✓" if first_diff is None or index < first_diff else "✗ first difference" if index == first_diff else "✗",
            "r1 tokens": " ".join(a.tokens_text) if a else "",
            "r2 tokens": " ".join(b.tokens_text) if b else "",
            "r1 hash": short(a.block_hash) if a and a.block_hash else "never hashed",
            "r2 hash": short(b.block_hash) if b and b.block_hash else "never hashed",
            "r1 extra keys": describe_extra_keys(a.extra_keys) if a else "",
            "r2 extra keys": describe_extra_keys(b.extra_keys) if b else "",
        })
    return rows
