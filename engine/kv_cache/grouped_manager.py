"""``GroupedKVCacheManager``: the scheduler's interface to a cache with several KV cache groups.

vLLM 0.33's ``KVCacheManager`` over a coordinator (:mod:`engine.kv_cache.coordinator`): the same
three questions as the single-group :class:`~engine.kv_cache.manager.KVCacheManager`, answered
per group. Blocks travel as one list per group (vLLM's ``KVCacheBlocks.blocks``). What a
sliding window adds, in :meth:`allocate_slots`: before counting what a request needs, every
group gives back the blocks that fell out of its window (null in the table), even when the
allocation is then refused.

The single-group manager stays the engine's default; this one is used when the layer pattern
has a sliding window (``EngineConfig.layer_pattern``), and it follows vLLM 0.33's rules only.
"""

from __future__ import annotations

from engine.errors import ConfigError, InvalidRequestError, RequestStateError, UnknownRequestError
from engine.events import CacheLookup, Event, EventLog
from engine.hashing import BlockHasher, event_extra_keys
from engine.kv_cache.block import KVCacheBlock
from engine.kv_cache.coordinator import GroupBlocks, get_kv_cache_coordinator
from engine.kv_cache.kv_cache_spec import KVCacheGroupSpec, kv_cache_groups_for_layers, parse_layer_pattern
from engine.kv_cache.stats import PrefixCacheStats
from engine.request import Request, RequestStatus
from engine.vllm_versions import DEFAULT_VLLM_VERSION, STATS_AT_ADMISSION, require_sliding_window_rules

#: The longest request the grouped manager expects (vLLM caps slots at max_model_len).
MAX_MODEL_LEN = 1 << 30


class GroupedKVCacheManager:
    def __init__(
        self,
        num_blocks: int,
        kv_cache_groups: list[KVCacheGroupSpec],
        *,
        enable_caching: bool = True,
        hash_algo: str = "sha256",
        hash_seed: str | None = None,
        vllm_version: str = DEFAULT_VLLM_VERSION,
        watermark: float = 0.0,
        enable_events: bool = True,
        max_model_len: int = MAX_MODEL_LEN,
    ) -> None:
        require_sliding_window_rules(vllm_version)
        if not 0.0 <= watermark < 1.0:
            raise ConfigError(f"watermark must be in [0, 1), got {watermark!r}.")
        self.hasher = BlockHasher(hash_algo, hash_seed, vllm_version)
        self.version = self.hasher.version
        self.events = EventLog(enabled=enable_events)
        self.coordinator = get_kv_cache_coordinator(
            kv_cache_groups, num_blocks, enable_caching, self.version.free_policy, self.events
        )
        self.block_pool = self.coordinator.block_pool
        self.kv_cache_groups = list(kv_cache_groups)
        self.block_size = self.coordinator.block_size
        self.num_blocks = num_blocks
        self.enable_caching = enable_caching
        self.max_model_len = max_model_len
        self.watermark_blocks = int(watermark * num_blocks)
        self.prefix_cache_stats = PrefixCacheStats()
        self._admitted: set[str] = set()

    @classmethod
    def from_layer_pattern(cls, num_blocks: int, block_size: int, layer_pattern: str, **kwargs) -> GroupedKVCacheManager:
        """A manager whose groups are those vLLM forms for ``layer_pattern`` (see kv_cache_spec)."""
        groups = kv_cache_groups_for_layers(parse_layer_pattern(layer_pattern), block_size)
        return cls(num_blocks, groups, **kwargs)

    # -- helpers ------------------------------------------------------------------------------------
    @property
    def num_groups(self) -> int:
        return self.coordinator.num_groups

    @property
    def usage(self) -> float:
        return self.block_pool.get_usage()

    @property
    def req_to_blocks(self) -> dict[str, list[KVCacheBlock]]:
        """Each admitted request's blocks of group 0 (the scheduler asks only who holds blocks)."""
        manager = self.coordinator.single_type_managers[0]
        return {rid: list(manager.req_to_blocks.get(rid, [])) for rid in self._admitted}

    @property
    def max_tokens_in_pool(self) -> int:
        """About the most tokens one request can hold: every full-attention group needs a block per
        ``block_size`` tokens, a sliding-window group only its window (plus a block being filled)."""
        usable = self.num_blocks - 1
        full = 0
        for group in self.kv_cache_groups:
            window = group.kv_cache_spec.sliding_window
            if window is None:
                full += 1
            else:
                usable -= -(-window // self.block_size) + 1
        if full == 0:
            return self.max_model_len
        return max(0, usable // full) * self.block_size

    def take_events(self) -> list[Event]:
        return self.events.take()

    def _attach(self, request: Request) -> None:
        request.attach_hasher(self.hasher, self.block_size)

    def prefix_cache_lookup_enabled(self, request: Request) -> bool:
        return self.enable_caching and not request.skip_reading_prefix_cache

    def record_prefix_cache_stats(self, request: Request, num_hits: int) -> None:
        if self.prefix_cache_lookup_enabled(request):
            self.prefix_cache_stats.record(request.num_tokens, num_hits, request.num_preemptions > 0)

    # -- lookup -----------------------------------------------------------------------------------
    def get_computed_blocks(self, request: Request) -> tuple[GroupBlocks, int]:
        """Each group's hit blocks and the hit length every group agrees on. Changes no state."""
        self._attach(request)
        if not self.prefix_cache_lookup_enabled(request):
            return self.coordinator.empty_blocks(), 0
        max_hit = request.num_tokens - 1
        hits, num_hit_tokens = self.coordinator.find_longest_cache_hit(request.block_hashes, max_hit)
        real = [b.block_id for b in hits[0] if not b.is_null] if hits else []
        self.events.emit(
            CacheLookup(request.request_id, real, num_hit_tokens, len(request.block_hashes), max_hit // self.block_size,
                        None, "hybrid hit search")
        )
        return hits, num_hit_tokens

    # -- allocation -------------------------------------------------------------------------------
    def allocate_slots(
        self,
        request: Request,
        num_new_tokens: int,
        num_new_computed_tokens: int = 0,
        new_computed_blocks: GroupBlocks | None = None,
        *,
        has_scheduled_reqs: bool = True,
    ) -> GroupBlocks | None:
        """Room for ``num_new_tokens`` more tokens in every group, or ``None`` if the pool cannot fit them.

        Blocks out of a window are released first, whatever the answer.
        """
        if request.is_finished:
            raise RequestStateError(f"Request {request.request_id!r} is finished; it cannot get new blocks.")
        if num_new_tokens < 0 or num_new_computed_tokens < 0:
            raise InvalidRequestError("num_new_tokens and num_new_computed_tokens must be >= 0.")
        if num_new_tokens == 0 and num_new_computed_tokens == 0:
            raise InvalidRequestError("num_new_tokens must be greater than 0 when there are no computed tokens to adopt.")
        self._attach(request)
        hits = new_computed_blocks if new_computed_blocks is not None else self.coordinator.empty_blocks()
        if len(hits) != self.num_groups:
            raise InvalidRequestError(f"new_computed_blocks has {len(hits)} groups, the cache has {self.num_groups}.")
        request_id = request.request_id
        num_computed_tokens = min(request.num_computed_tokens + num_new_computed_tokens, self.max_model_len)
        admitting = request.status in (RequestStatus.WAITING, RequestStatus.PREEMPTED)
        reserve = self.watermark_blocks if has_scheduled_reqs and admitting else 0
        num_tokens_need_slot = min(num_computed_tokens + num_new_tokens, self.max_model_len)

        self.coordinator.remove_skipped_blocks(request_id, num_computed_tokens)
        needed = self.coordinator.get_num_blocks_to_allocate(request_id, num_tokens_need_slot, hits, num_computed_tokens)
        if needed + reserve > self.block_pool.get_num_free_blocks():
            return None

        if request_id not in self._admitted:
            self._admitted.add(request_id)
            if self.version.stats_counted_at == STATS_AT_ADMISSION:
                self.record_prefix_cache_stats(request, num_new_computed_tokens)
        if any(hits):
            self.coordinator.allocate_new_computed_blocks(request_id, hits, num_computed_tokens)
        new_blocks = self.coordinator.allocate_new_blocks(request_id, num_tokens_need_slot)
        self.coordinator.cache_blocks(
            request, min(num_computed_tokens + num_new_tokens, request.num_tokens), self._extra_keys_for(request)
        )
        return new_blocks

    def _extra_keys_for(self, request: Request):
        def extra_keys(index: int) -> tuple | None:
            return event_extra_keys(
                self.hasher.extra_keys(index, lora_name=request.lora_name, lora_path=request.lora_path,
                                       cache_salt=request.cache_salt)
            )
        return extra_keys

    # -- release ----------------------------------------------------------------------------------
    def free(self, request: Request | str) -> None:
        """Release every group's blocks (group by group, each tail first)."""
        request_id = request if isinstance(request, str) else request.request_id
        if request_id not in self._admitted:
            raise UnknownRequestError(
                f"Request {request_id!r} holds no blocks: it was never allocated or is already freed."
            )
        self._admitted.discard(request_id)
        self.coordinator.free(request_id)

    def get_blocks(self, request_id: str) -> GroupBlocks:
        return self.coordinator.get_blocks(request_id)

    def get_block_ids(self, request_id: str) -> tuple[list[int], ...]:
        if request_id not in self._admitted:
            raise UnknownRequestError(f"Request {request_id!r} holds no blocks.")
        return tuple([b.block_id for b in blocks] for blocks in self.coordinator.get_blocks(request_id))

    def reset_prefix_cache(self) -> bool:
        ok = self.coordinator.reset_prefix_cache()
        if ok:
            self.prefix_cache_stats.reset()
        return ok

    def blocks_held(self) -> list[KVCacheBlock]:
        """Every block some request holds (for views): ref count above zero, null excluded."""
        return [b for b in self.block_pool.blocks[1:] if b.ref_cnt > 0]
