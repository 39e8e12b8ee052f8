"""Events in plain English, for a first-year student reading the event log."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from engine.events import (
    AllBlocksCleared,
    BlockRemoved,
    BlocksAllocated,
    BlocksFreed,
    BlockStored,
    BlocksTouched,
    CacheLookup,
    Event,
    RequestArrived,
    RequestFinished,
    RequestPreempted,
    RequestScheduled,
    StepStarted,
    TokenGenerated,
)
from engine.hashing import short_hash

TokenText = Callable[[int], str]


def default_token_text(token_id: int) -> str:
    return str(token_id)


def tokens_label(token_ids: Sequence[int] | None, token_text: TokenText | None = None, limit: int = 8) -> str:
    """"A B C D" for a block's tokens (cut with an ellipsis after ``limit``)."""
    if not token_ids:
        return ""
    text = token_text or default_token_text
    words = [text(t) for t in token_ids[:limit]]
    return " ".join(words) + (" …" if len(token_ids) > limit else "")


def ids(block_ids: Sequence[int]) -> str:
    """"1, 2 and 3" style list of block ids."""
    items = [str(b) for b in block_ids]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def blocks_word(block_ids: Sequence[int]) -> str:
    """"block 4" or "blocks 1, 2 and 3"."""
    return ("block " if len(block_ids) == 1 else "blocks ") + ids(block_ids)


_LABEL_MARKUP = re.compile(r"\s*@[A-Za-z0-9_\-]+")


def without_markup(line: str) -> str:
    """A scenario line as a student reads it: lesson bookmarks (``# @label``) removed.

    ``step  # @r0-prefill`` -> ``step``; ``run  # @done all finish`` -> ``run  # all finish``.
    """
    if "#" not in line:
        return line.rstrip()
    code, _, comment = line.partition("#")
    comment = _LABEL_MARKUP.sub("", comment).strip()
    return f"{code}# {comment}".rstrip() if comment else code.rstrip()


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def describe_lookup(e: CacheLookup) -> str:
    if e.stop_reason in ("caching is off", "request asks for prompt logprobs"):
        return f"{e.request_id} skips the cache lookup: {e.stop_reason}."
    if e.hit_block_ids:
        found = f"{e.request_id} hit {blocks_word(e.hit_block_ids)} ({e.num_hit_tokens} tokens)"
    else:
        found = f"{e.request_id} found no cached block"
    if e.first_miss_block_index is not None:
        n = e.first_miss_block_index
        why = f"lookup stopped at its {_ordinal(n + 1)} block (index {n}): miss, so that block and every later one must be computed"
    elif e.stop_reason == "no full block to look up":
        why = "its prompt has no full block to look up"
    else:
        why = f"lookup stopped: {e.stop_reason}"
    return f"{found} — {why}."


def describe_free(e: BlocksFreed) -> str:
    parts = [f"{e.request_id} releases {blocks_word(e.block_ids)} (last block first)."]
    if e.prepended_block_ids:
        parts.append(f"{ids(e.prepended_block_ids)} → head of the free queue (no hash, nothing to lose: reused first).")
    if e.appended_block_ids:
        parts.append(f"{ids(e.appended_block_ids)} → tail of the free queue (reused last; a block that still has its hash can be hit until then).")
    kept = [b for b in e.block_ids if b not in e.prepended_block_ids and b not in e.appended_block_ids]
    if kept:
        parts.append(f"{ids(kept)} still used by another request, so not freed.")
    return " ".join(parts)


def describe_event(
    event: Event,
    token_text: TokenText | None = None,
    contents: Mapping[bytes, list[int]] | None = None,
) -> str:
    """One sentence (or two) saying what ``event`` did. ``token_text`` turns ids into words."""
    text = token_text or default_token_text
    if isinstance(event, StepStarted):
        return f"Engine step {event.step} begins: the scheduler picks which requests run."
    if isinstance(event, RequestArrived):
        preview = tokens_label(event.prompt_token_ids, text, limit=6)
        return f"{event.request_id} arrives with a {event.num_prompt_tokens}-token prompt ({preview}) and waits."
    if isinstance(event, CacheLookup):
        return describe_lookup(event)
    if isinstance(event, BlocksTouched):
        msg = f"{event.request_id} takes the cached {blocks_word(event.block_ids)} (ref count +1)"
        if event.revived_block_ids:
            return msg + f"; {ids(event.revived_block_ids)} leave the free queue, so they can no longer be evicted."
        return msg + "; they were already in use, so they just gain a reader."
    if isinstance(event, BlocksAllocated):
        return f"{event.request_id} gets {plural(len(event.block_ids), 'new block')} ({ids(event.block_ids)}) from the head of the free queue."
    if isinstance(event, BlockRemoved):
        parts = []
        for block_id, block_hash in zip(event.block_ids, event.block_hashes):
            tokens = tokens_label(contents.get(block_hash), text) if contents else ""
            what = f"hash {short_hash(block_hash)}" + (f" ({tokens})" if tokens else "")
            parts.append(f"Block {block_id} is evicted: it is reused"
                         + (f" for {event.request_id}" if event.request_id else "")
                         + f", so its {what} leaves the hash table.")
        return " ".join(parts)
    if isinstance(event, BlockStored):
        size = event.block_size
        chunks = [tokens_label(event.token_ids[i * size : (i + 1) * size], text) for i in range(len(event.block_ids))]
        who = f" (filled by {event.request_id})" if event.request_id else ""
        return (f"Physical {blocks_word(event.block_ids)}{who} "
                f"{'is' if len(event.block_ids) == 1 else 'are'} full: hashed and added to the hash table ("
                + " | ".join(chunks) + ").")
    if isinstance(event, BlocksFreed):
        return describe_free(event)
    if isinstance(event, RequestScheduled):
        done = (f" (the {plural(event.num_computed_tokens, 'token')} before them already have K/V in its blocks: "
                "cache hits or computed in earlier steps)") if event.num_computed_tokens else ""
        return f"{event.request_id} computes {plural(event.num_new_tokens, 'token')} this step{done}."
    if isinstance(event, TokenGenerated):
        return f"{event.request_id} generates “{text(event.token_id)}”."
    if isinstance(event, RequestPreempted):
        return (f"{event.request_id} is preempted: the pool ran out of free blocks, so its blocks were freed "
                "(they stay cached) and it waits at the front of the queue to be recomputed.")
    if isinstance(event, RequestFinished):
        return f"{event.request_id} is {event.reason}."
    if isinstance(event, AllBlocksCleared):
        return "The prefix cache is reset: every hash is forgotten; all blocks are plain free blocks again."
    return f"{event.kind} event."


#: Short tags for an event-log list, by event kind.
EVENT_TAGS: dict[str, str] = {
    "step": "STEP", "arrived": "ARRIVE", "lookup": "LOOKUP", "touch": "HIT", "allocate": "ALLOC",
    "evicted": "EVICT", "stored": "CACHE", "free": "FREE", "schedule": "RUN", "token": "TOKEN",
    "preempt": "PREEMPT", "finish": "FINISH", "cleared": "RESET",
}


def describe_extra_keys(extra_keys: tuple | None) -> str:
    """A block's extra keys in words: ``(("lora", "math", None),)`` -> ``LoRA adapter 'math'``.

    Students should read what went into the hash, not a Python tuple.
    """
    if not extra_keys:
        return "none"
    parts = []
    for key in extra_keys:
        kind = key[0] if isinstance(key, tuple) and key else key
        if kind == "lora":
            path = f" (path {key[2]})" if len(key) > 2 and key[2] else ""
            parts.append(f"LoRA adapter '{key[1]}'{path}")
        elif kind == "cache_salt":
            parts.append(f"cache salt '{key[1]}'")
        elif kind == "mm":
            parts.append(f"image '{key[1]}' at offset {key[2]}" if len(key) > 2 else f"image '{key[1]}'")
        else:
            parts.append(str(kind))
    return " · ".join(parts)
