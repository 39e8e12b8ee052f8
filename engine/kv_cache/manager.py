"""``KVCacheManager``: the scheduler's interface to the prefix cache.

Per request it keeps the block table (``req_to_blocks``) and how many of those blocks are
already in the hash table (``num_cached_block``). It answers three questions:

* :meth:`get_computed_blocks`: how much of this request is already cached? (read only)
* :meth:`allocate_slots`: give it room for ``n`` more tokens, or say no with nothing changed.
* :meth:`free`: it is done (or preempted): release its blocks, tail first.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.errors import ConfigError, InvalidRequestError, RequestStateError, UnknownRequestError
from engine.events import BlocksFreed, CacheLookup, Event, EventLog
from engine.hashing import BlockHasher, event_extra_keys
from engine.kv_cache.block import KVCacheBlock
from engine.kv_cache.block_pool import BlockPool
from engine.kv_cache.stats import PrefixCacheStats
from engine.request import Request, RequestStatus
from engine.vllm_versions import DEFAULT_VLLM_VERSION, STATS_AT_ADMISSION, STATS_AT_LOOKUP


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


class KVCacheManager:
    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        *,
        enable_caching: bool = True,
        hash_algo: str = "sha256",
        hash_seed: str | None = None,
        vllm_version: str = DEFAULT_VLLM_VERSION,
        watermark: float = 0.0,
        enable_events: bool = True,
        block_pool_cls: Callable[..., BlockPool] = BlockPool,
    ) -> None:
        """``vllm_version`` picks every version-dependent rule (:mod:`engine.vllm_versions`)."""
        if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
            raise ConfigError(f"block_size must be an integer >= 1, got {block_size!r}.")
        if not 0.0 <= watermark < 1.0:
            raise ConfigError(f"watermark must be in [0, 1), got {watermark!r}.")
        self.hasher = BlockHasher(hash_algo, hash_seed, vllm_version)  # validates algorithm and version
        self.version = self.hasher.version
        self.events = EventLog(enabled=enable_events)
        # A BlockPool subclass may decide eviction differently (see BlockPool._take_free_blocks).
        self.block_pool = block_pool_cls(num_blocks, enable_caching, self.version.free_policy, self.events)
        self.block_size = block_size
        self.num_blocks = num_blocks
        self.enable_caching = enable_caching
        self.watermark = watermark
        # vLLM counts the null block too; versions without a watermark reserve nothing.
        self.watermark_blocks = int(watermark * num_blocks) if self.version.watermark else 0
        self.req_to_blocks: dict[str, list[KVCacheBlock]] = {}
        self.num_cached_block: dict[str, int] = {}
        self.prefix_cache_stats = PrefixCacheStats()

    # -- helpers ------------------------------------------------------------------------------------
    @property
    def usage(self) -> float:
        return self.block_pool.get_usage()

    @property
    def max_tokens_in_pool(self) -> int:
        """The most tokens one request could ever hold (every usable block)."""
        return (self.num_blocks - 1) * self.block_size

    def _attach(self, request: Request) -> None:
        request.attach_hasher(self.hasher, self.block_size)

    def take_events(self) -> list[Event]:
        """Events since the last call (vLLM's ``take_events``); full history in ``events.events``."""
        return self.events.take()

    # -- lookup -----------------------------------------------------------------------------------
    def get_computed_blocks(self, request: Request) -> tuple[list[KVCacheBlock], int]:
        """The longest run of cached blocks at the start of the request, and its token count.

        Stops at the first miss, and never hits the block holding the last token: that token
        must be computed to get the logits of the next one. Changes no state.
        """
        self._attach(request)
        num_full_blocks = len(request.block_hashes)
        max_hit_blocks = (request.num_tokens - 1) // self.block_size
        if not self.prefix_cache_lookup_enabled(request):
            reason = "caching is off" if not self.enable_caching else "request asks for prompt logprobs"
            self.events.emit(CacheLookup(request.request_id, [], 0, num_full_blocks, max_hit_blocks, None, reason))
            return [], 0
        hits: list[KVCacheBlock] = []
        first_miss: int | None = None
        stop_reason = "no full block to look up"
        for index, block_hash in enumerate(request.block_hashes[:max_hit_blocks]):
            block = self.block_pool.get_cached_block(block_hash)
            if block is None:
                first_miss, stop_reason = index, "miss"
                break
            hits.append(block)
        else:
            if max_hit_blocks > 0 and len(hits) == max_hit_blocks:
                stop_reason = (
                    "the last token is always recomputed"
                    if max_hit_blocks < num_full_blocks
                    else "the partial tail block is never cached"
                    if request.num_tokens % self.block_size
                    else "all full blocks hit"
                )
        self.events.emit(
            CacheLookup(
                request.request_id, [b.block_id for b in hits], len(hits) * self.block_size,
                num_full_blocks, max_hit_blocks, first_miss, stop_reason,
            )
        )
        if self.version.stats_counted_at == STATS_AT_LOOKUP:
            self.record_prefix_cache_stats(request, len(hits) * self.block_size)
        return hits, len(hits) * self.block_size

    def prefix_cache_lookup_enabled(self, request: Request) -> bool:
        """Prompt-logprob requests never read the cache (they need logits for every prompt token)."""
        return self.enable_caching and not request.skip_reading_prefix_cache

    def record_prefix_cache_stats(self, request: Request, num_hits: int) -> None:
        """Count one lookup, unless the request could not look the cache up at all."""
        if self.prefix_cache_lookup_enabled(request):
            self.prefix_cache_stats.record(request.num_tokens, num_hits, request.num_preemptions > 0)

    # -- allocation -------------------------------------------------------------------------------
    def allocate_slots(
        self,
        request: Request,
        num_new_tokens: int,
        num_new_computed_tokens: int = 0,
        new_computed_blocks: list[KVCacheBlock] | None = None,
        *,
        has_scheduled_reqs: bool = True,
    ) -> list[KVCacheBlock] | None:
        """Make room for ``num_new_tokens`` more tokens of ``request``.

        ``new_computed_blocks`` / ``num_new_computed_tokens`` are the hits from
        :meth:`get_computed_blocks` (first admission only). Returns the newly allocated
        blocks, or ``None`` with nothing changed when the pool cannot fit them.
        The watermark holds back blocks from a waiting or preempted request only while
        ``has_scheduled_reqs`` (some request already runs): an idle engine lends out all.
        """
        if request.is_finished:
            raise RequestStateError(f"Request {request.request_id!r} is finished; it cannot get new blocks.")
        if num_new_tokens < 0 or num_new_computed_tokens < 0:
            raise InvalidRequestError("num_new_tokens and num_new_computed_tokens must be >= 0.")
        self._attach(request)
        new_computed_blocks = list(new_computed_blocks or [])
        if num_new_computed_tokens != len(new_computed_blocks) * self.block_size:
            raise InvalidRequestError(
                f"num_new_computed_tokens={num_new_computed_tokens} does not match "
                f"{len(new_computed_blocks)} hit blocks of {self.block_size} tokens."
            )
        request_id = request.request_id
        req_blocks = self.req_to_blocks.get(request_id, [])
        num_computed_tokens = request.num_computed_tokens + num_new_computed_tokens
        num_tokens_need_slot = num_computed_tokens + num_new_tokens
        num_blocks_to_allocate = max(0, cdiv(num_tokens_need_slot, self.block_size) - len(req_blocks) - len(new_computed_blocks))

        # Hit blocks sitting in the free queue stop being free once touched.
        num_evictable_hits = sum(1 for b in new_computed_blocks if b.ref_cnt == 0 and not b.is_null)
        available = self.block_pool.get_num_free_blocks() - num_evictable_hits
        admitting = request.status in (RequestStatus.WAITING, RequestStatus.PREEMPTED)
        reserve = self.watermark_blocks if has_scheduled_reqs and admitting else 0
        if num_blocks_to_allocate > available - reserve:
            return None

        is_new = request_id not in self.req_to_blocks
        if is_new:
            if self.version.stats_counted_at == STATS_AT_ADMISSION:
                self.record_prefix_cache_stats(request, num_new_computed_tokens)
            self.req_to_blocks[request_id] = req_blocks
            self.num_cached_block[request_id] = 0
        if new_computed_blocks:
            self.block_pool.touch(new_computed_blocks, request_id)
            req_blocks.extend(new_computed_blocks)
            # Hits are already in the hash table: count them as cached.
            self.num_cached_block[request_id] = len(req_blocks)
        new_blocks = self.block_pool.get_new_blocks(num_blocks_to_allocate, request_id)
        req_blocks.extend(new_blocks)

        if self.enable_caching:
            # Cache at scheduling time, so a request later in the same batch can hit them.
            self.cache_blocks(request, min(num_tokens_need_slot, request.num_tokens))
        return new_blocks

    def cache_blocks(self, request: Request, num_tokens: int) -> None:
        """Insert every block of ``request`` that is full of known tokens into the hash table."""
        request_id = request.request_id
        num_cached = self.num_cached_block.get(request_id, 0)
        num_full = min(num_tokens // self.block_size, len(request.block_hashes))
        if num_full <= num_cached:
            return
        keys = [
            event_extra_keys(
                self.hasher.extra_keys(i, lora_name=request.lora_name, lora_path=request.lora_path, cache_salt=request.cache_salt)
            )
            for i in range(num_cached, num_full)
        ]
        self.block_pool.cache_full_blocks(
            self.req_to_blocks[request_id], request.block_hashes, num_cached, num_full,
            self.block_size, request.all_token_ids, request_id=request_id, lora_name=request.lora_name,
            lora_id=request.lora_id, extra_keys=keys,
        )
        self.num_cached_block[request_id] = num_full

    # -- release ----------------------------------------------------------------------------------
    def free(self, request: Request | str) -> None:
        """Release a request's blocks **tail first**, so its prefix outlives its suffix."""
        request_id = request if isinstance(request, str) else request.request_id
        if request_id not in self.req_to_blocks:
            raise UnknownRequestError(
                f"Request {request_id!r} holds no blocks: it was never allocated or is already freed."
            )
        blocks = self.req_to_blocks.pop(request_id)
        self.num_cached_block.pop(request_id, None)
        ordered = list(reversed(blocks))
        to_head, to_tail = self.block_pool.free_blocks(ordered)
        self.events.emit(BlocksFreed(request_id, [b.block_id for b in ordered], to_head, to_tail))

    def get_block_ids(self, request_id: str) -> list[int]:
        if request_id not in self.req_to_blocks:
            raise UnknownRequestError(f"Request {request_id!r} holds no blocks.")
        return [block.block_id for block in self.req_to_blocks[request_id]]

    def get_blocks(self, request_id: str) -> list[KVCacheBlock]:
        return list(self.req_to_blocks.get(request_id, []))

    def reset_prefix_cache(self) -> bool:
        """Forget all cached prefixes; ``False`` (nothing changed) while any request holds blocks."""
        ok = bool(self.block_pool.reset_prefix_cache())
        if ok:
            self.prefix_cache_stats.reset()
        return ok
