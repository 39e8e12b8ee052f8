"""What the event log knows beyond a snapshot: the tokens behind each hash, and which blocks were hits.

A :class:`~engine.events.CacheSnapshot` holds ids, ref counts and hashes; the tokens of a
block and whether a request *hit* it live in the events. These helpers read them out once
so figures can show "A B C D" instead of a bare hash.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from engine.events import BlocksFreed, BlockStored, BlocksTouched, Event

TokenText = Callable[[int], str]


def default_token_text(token_id: int) -> str:
    return str(token_id)


def block_contents(events: Sequence[Event]) -> dict[bytes, list[int]]:
    """hash -> the token ids of that block (a hash fixes its tokens, so the whole log is safe to use)."""
    contents: dict[bytes, list[int]] = {}
    for event in events:
        if isinstance(event, BlockStored):
            size = event.block_size
            for i, block_hash in enumerate(event.block_hashes):
                contents[block_hash] = list(event.token_ids[i * size : (i + 1) * size])
    return contents


def hit_blocks(events: Sequence[Event], upto: int) -> dict[str, set[int]]:
    """request id -> the blocks it got from the cache (touched), for requests live after ``upto`` events."""
    hits: dict[str, set[int]] = {}
    for event in events[:upto]:
        if isinstance(event, BlocksTouched):
            hits.setdefault(event.request_id, set()).update(event.block_ids)
        elif isinstance(event, BlocksFreed):
            hits.pop(event.request_id, None)
    return hits


def tokens_label(token_ids: Sequence[int] | None, token_text: TokenText | None = None, limit: int = 8) -> str:
    """"A B C D" for a block's tokens (cut with an ellipsis after ``limit``)."""
    if not token_ids:
        return ""
    text = token_text or default_token_text
    words = [text(t) for t in token_ids[:limit]]
    return " ".join(words) + (" …" if len(token_ids) > limit else "")
