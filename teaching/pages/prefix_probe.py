"""Probe the prefix cache with two requests: how much of r2 can reuse what r1 left behind?

The Hash chain and "Why did it miss?" pages both ask this question. The answer is never
re-derived here: r1 really runs on a simulator :class:`~engine.llm_engine.LLMEngine` and
finishes (its full blocks stay cached in the free queue), then r2 is scheduled and the
engine's own ``KVCacheManager.get_computed_blocks`` decides, leaving a ``CacheLookup``
event. This module only collects the facts (tokens, hashes, extra keys, the hash table as
it was at the lookup) into plain data the figures and explanations can use.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.config import EngineConfig
from engine.errors import InvalidRequestError
from engine.events import CacheLookup
from engine.hashing import BlockHash, block_extra_keys
from engine.llm_engine import LLMEngine
from engine.request import SamplingParams
from teaching import limits
from teaching.limits import check_size

CACHED_ID = "r1"
PROBE_ID = "r2"


@dataclass(frozen=True)
class RequestSpec:
    """One request as a student types it: a prompt (words, or token ids) plus its cache keys."""

    prompt: str | list[int]
    cache_salt: str | None = None
    lora_name: str | None = None
    lora_path: str | None = None


@dataclass(frozen=True)
class BlockTrace:
    """One logical block of a request: its tokens, what went into its hash, and the lookup.

    ``block_hash`` is ``None`` for the partial tail block: it is never hashed, so it can
    never be cached or hit. ``in_table`` says whether the hash was in the hash table when
    r2 looked itself up; ``hit_block_id`` is the physical block the engine's lookup
    returned (``None`` when the lookup did not use this block).
    """

    index: int
    start: int
    token_ids: tuple[int, ...]
    tokens_text: tuple[str, ...]
    parent_hash: BlockHash | None
    extra_keys: tuple | None
    block_hash: BlockHash | None
    in_table: bool = False
    hit_block_id: int | None = None

    @property
    def is_full(self) -> bool:
        return self.block_hash is not None

    @property
    def end(self) -> int:
        """One past the last token position of the block."""
        return self.start + len(self.token_ids)


@dataclass(frozen=True)
class RequestTrace:
    """A request's tokens and blocks, as the engine hashed them."""

    request_id: str
    spec: RequestSpec
    token_ids: tuple[int, ...]
    tokens_text: tuple[str, ...]
    blocks: tuple[BlockTrace, ...]

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def full_blocks(self) -> tuple[BlockTrace, ...]:
        return tuple(b for b in self.blocks if b.is_full)


@dataclass(frozen=True)
class ProbeResult:
    """Everything the pages show about "r1 ran, then r2 looked itself up"."""

    block_size: int
    hash_algo: str
    seed: str
    seed_reason: str
    none_hash: BlockHash
    cached: RequestTrace  # r1: ran to completion, its full blocks are in the hash table
    probe: RequestTrace  # r2: looked up against r1's blocks
    lookup: CacheLookup  # the engine's verdict for r2
    hash_table: tuple[BlockHash, ...]  # hashes in the table at r2's lookup, insertion order
    tokenizer: str = "words"  # "words", or SmolLM2's (teaching/pages/real_tokens.py)
    prompt_texts: tuple[str, str] | None = None  # the texts as typed, when a real tokenizer made the ids

    @property
    def num_hit_blocks(self) -> int:
        return len(self.lookup.hit_block_ids)

    @property
    def first_diff_token(self) -> int | None:
        """First position where r1's and r2's tokens differ (``None`` if identical).

        When one prompt is a prefix of the other, it is where the shorter one ends.
        """
        a, b = self.cached.token_ids, self.probe.token_ids
        for position, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return position
        return None if len(a) == len(b) else min(len(a), len(b))

    @property
    def first_diff_block(self) -> int | None:
        """First block index whose hash differs between r1 and r2 (partial tails count as different)."""
        for a, b in zip(self.cached.blocks, self.probe.blocks):
            if a.block_hash is None or a.block_hash != b.block_hash:
                return a.index
        shorter = min(len(self.cached.blocks), len(self.probe.blocks))
        return None if len(self.cached.blocks) == len(self.probe.blocks) else shorter


def parse_token_ids(text: str) -> list[int]:
    """Token ids typed as ``"1, 2 3"`` -> ``[1, 2, 3]``, or a clear error for anything else."""
    check_size("The prompt", len(text), limits.MAX_PROBE_CHARS, "characters")
    words = [w for w in re.split(r"[\s,]+", text.strip()) if w]
    if not words:
        raise InvalidRequestError("The prompt is empty: type some token ids, e.g. 1 2 3 4.")
    ids: list[int] = []
    for position, word in enumerate(words):
        if not re.fullmatch(r"[0-9]{1,9}", word):
            raise InvalidRequestError(
                f"Token {position} is {word!r}: token ids are whole numbers from 0 to 999,999,999, separated by "
                "spaces or commas."
            )
        ids.append(int(word))
    return ids


def _num_tokens_upper_bound(prompt: str | list[int]) -> int:
    return len(prompt.split()) if isinstance(prompt, str) else len(prompt)


def _trace(
    engine: LLMEngine, request_id: str, spec: RequestSpec, hash_table: set[BlockHash], hit_ids: list[int],
    token_text: Callable[[int], str] | None = None,
) -> RequestTrace:
    """Collect one request's blocks from the engine: its token ids and ``block_hashes``."""
    request = engine.get_request(request_id)
    block_size = engine.kv_cache_manager.block_size
    none_hash = engine.kv_cache_manager.hasher.none_hash
    token_ids = tuple(request.prompt_token_ids)
    if token_text is not None:
        texts = tuple(token_text(t) for t in token_ids)
    elif isinstance(spec.prompt, str):
        texts = tuple(engine.tokenizer.token_text(t) for t in token_ids)
    else:
        texts = tuple(str(t) for t in token_ids)
    hashes = request.block_hashes
    blocks = []
    for index, start in enumerate(range(0, len(token_ids), block_size)):
        full = index < len(hashes) and start + block_size <= len(token_ids)
        blocks.append(
            BlockTrace(
                index=index,
                start=start,
                token_ids=token_ids[start : start + block_size],
                tokens_text=texts[start : start + block_size],
                parent_hash=(hashes[index - 1] if index else none_hash) if full else None,
                extra_keys=block_extra_keys(
                    index, lora_name=spec.lora_name, lora_path=spec.lora_path, cache_salt=spec.cache_salt
                ),
                block_hash=hashes[index] if full else None,
                in_table=full and hashes[index] in hash_table,
                hit_block_id=hit_ids[index] if index < len(hit_ids) else None,
            )
        )
    return RequestTrace(request_id, spec, token_ids, texts, tuple(blocks))


def probe_prefix_cache(
    cached: RequestSpec,
    probe: RequestSpec,
    *,
    block_size: int = 4,
    hash_algo: str = "sha256",
    hash_seed: str | None = None,
    token_text: Callable[[int], str] | None = None,
    tokenizer: str = "words",
    prompt_texts: tuple[str, str] | None = None,
) -> ProbeResult:
    """Run ``cached`` (r1) to completion on a simulator engine, then look ``probe`` (r2) up.

    Prompts as token ids from a real tokenizer come with ``token_text`` (each id's text, for the
    figures), the tokenizer's name and the texts as typed (:mod:`teaching.pages.real_tokens`).

    Raises :class:`~engine.errors.PrefixLabError` subclasses with a student-readable
    message for bad input (empty prompt, bad block size, unknown algorithm, ...).
    """
    for request_id, spec in ((CACHED_ID, cached), (PROBE_ID, probe)):  # bound the work before doing any
        prompt = spec.prompt
        if isinstance(prompt, str):
            check_size(f"{request_id}'s prompt", len(prompt), limits.MAX_PROBE_CHARS, "characters")
        check_size(f"{request_id}'s prompt", _num_tokens_upper_bound(prompt), limits.MAX_PROBE_TOKENS, "tokens",
                   "This page shows hashing block by block; a few hundred tokens show everything.")
        for name, key in (("cache salt", spec.cache_salt), ("LoRA name", spec.lora_name)):
            check_size(f"{request_id}'s {name}", len(key or ""), limits.MAX_EXTRA_KEY_CHARS, "characters")
    # Room for both requests at once, so r1's blocks are never evicted before r2 looks.
    num_blocks = _num_tokens_upper_bound(cached.prompt) + _num_tokens_upper_bound(probe.prompt) + 4
    engine = LLMEngine(
        EngineConfig(
            backend="simulator", block_size=block_size, num_blocks=num_blocks,
            hash_algo=hash_algo, hash_seed=hash_seed,
        )
    )
    one_token = SamplingParams(max_tokens=1)
    for request_id, spec in ((CACHED_ID, cached), (PROBE_ID, probe)):  # validate both before running
        try:
            engine.tokenize(spec.prompt)
        except InvalidRequestError as err:
            raise InvalidRequestError(f"{request_id}: {err}") from None
    engine.add_request(
        cached.prompt, one_token, CACHED_ID,
        lora_name=cached.lora_name or None, lora_path=cached.lora_path, cache_salt=cached.cache_salt or None,
    )
    while engine.has_unfinished_requests():
        engine.step()
    engine.add_request(
        probe.prompt, one_token, PROBE_ID,
        lora_name=probe.lora_name or None, lora_path=probe.lora_path, cache_salt=probe.cache_salt or None,
    )
    engine.step()  # schedules r2: the scheduler's lookup emits CacheLookup

    events = engine.kv_cache_manager.events.events
    lookup_index = next(
        i for i, e in enumerate(events) if isinstance(e, CacheLookup) and e.request_id == PROBE_ID
    )
    lookup = events[lookup_index]
    assert isinstance(lookup, CacheLookup)
    # The hash table exactly as it was when r2 looked itself up (before r2 stored its own blocks).
    table = tuple(engine.timeline().state_at(lookup_index).hash_table)
    hasher = engine.kv_cache_manager.hasher
    return ProbeResult(
        block_size=block_size,
        hash_algo=hasher.algo,
        seed=str(hasher.seed),
        seed_reason=hasher.seed_reason,
        none_hash=hasher.none_hash,
        cached=_trace(engine, CACHED_ID, _normalised(cached), set(table), [], token_text),
        probe=_trace(engine, PROBE_ID, _normalised(probe), set(table), list(lookup.hit_block_ids), token_text),
        lookup=lookup,
        hash_table=table,
        tokenizer=tokenizer,
        prompt_texts=prompt_texts,
    )


def _normalised(spec: RequestSpec) -> RequestSpec:
    """Blank salt / LoRA name mean "none", exactly as the engine was told."""
    return RequestSpec(spec.prompt, spec.cache_salt or None, spec.lora_name or None, spec.lora_path)


def changed_blocks(cached: Sequence[BlockTrace], probe: Sequence[BlockTrace]) -> list[int]:
    """Indices of r2's full blocks whose hash differs from r1's block at the same index."""
    return [
        b.index for b in probe
        if b.is_full and (b.index >= len(cached) or cached[b.index].block_hash != b.block_hash)
    ]


def replace_token(prompt: str | list[int], position: int, new_token: str | int) -> str | list[int]:
    """``prompt`` with the token at ``position`` replaced ("edit one token").

    Words are split on whitespace, exactly as the simulator's tokenizer does.
    """
    tokens: list = prompt.split() if isinstance(prompt, str) else list(prompt)
    if not 0 <= position < len(tokens):
        raise InvalidRequestError(
            f"Token position {position} is outside the prompt: it has {len(tokens)} tokens (0-{len(tokens) - 1})."
        )
    if isinstance(prompt, str):
        word = str(new_token).strip()
        if not word or len(word.split()) != 1:
            raise InvalidRequestError("The new token must be exactly one word (no spaces).")
        tokens[position] = word
        return " ".join(tokens)
    tokens[position] = new_token
    return tokens
