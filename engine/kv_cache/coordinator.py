"""KV cache coordinators: the groups of one model, driven together over one block pool.

vLLM 0.33 picks one of three (``get_kv_cache_coordinator``):

* ``KVCacheCoordinatorNoPrefixCache`` when caching is off: every group allocates and frees, no
  group ever hits.
* ``UnitaryKVCacheCoordinator`` for one group (all layers full attention, or all sliding).
* ``HybridKVCacheCoordinator`` for several groups. Groups with equal specs are looked up
  together (a block hits only if every one of them has it). The hit search is a fixed point:
  full attention first (its hit only shrinks), then each other spec either accepts the candidate
  length or cuts it, and the round repeats until no spec cuts it. With exactly two specs, full
  attention and one other, one round is enough. Full-attention hits are then cut to the agreed
  length.

Allocation asks every group in order; freeing frees each group's blocks in group order, each
group tail first, so the free queue order depends on the group order too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.events import EventLog
from engine.hashing import BlockHash
from engine.kv_cache.block import KVCacheBlock
from engine.kv_cache.group_block_pool import GroupedBlockPool
from engine.kv_cache.kv_cache_spec import FullAttentionSpec, KVCacheGroupSpec, KVCacheSpec
from engine.kv_cache.single_type_manager import SingleTypeKVCacheManager, cdiv, manager_for_spec
from engine.request import Request

#: The hit of each group (``KVCacheBlocks.blocks`` in vLLM): one list per group.
GroupBlocks = tuple[list[KVCacheBlock], ...]


class KVCacheCoordinator:
    """What every coordinator shares: the pool, one manager per group, allocation and release."""

    def __init__(
        self,
        kv_cache_groups: Sequence[KVCacheGroupSpec],
        num_blocks: int,
        enable_caching: bool,
        free_policy: str = "vllm",
        events: EventLog | None = None,
    ) -> None:
        self.kv_cache_groups = list(kv_cache_groups)
        if not self.kv_cache_groups:
            raise ValueError("a coordinator needs at least one KV cache group")
        block_sizes = {g.kv_cache_spec.block_size for g in self.kv_cache_groups}
        if len(block_sizes) != 1:
            raise ValueError(f"every group must have the same block size, got {sorted(block_sizes)}")
        self.block_size = block_sizes.pop()
        self.enable_caching = enable_caching
        self.block_pool = GroupedBlockPool(
            num_blocks, enable_caching, free_policy, events,
            group_metadata=[(g.kv_cache_spec.kind, g.kv_cache_spec.sliding_window) for g in self.kv_cache_groups],
        )
        self.single_type_managers: tuple[SingleTypeKVCacheManager, ...] = tuple(
            manager_for_spec(group.kv_cache_spec, self.block_pool, enable_caching, index)
            for index, group in enumerate(self.kv_cache_groups)
        )

    @property
    def num_groups(self) -> int:
        return len(self.single_type_managers)

    def empty_blocks(self) -> GroupBlocks:
        return tuple([] for _ in self.single_type_managers)

    def find_longest_cache_hit(self, block_hashes: list[BlockHash], max_cache_hit_length: int) -> tuple[GroupBlocks, int]:
        raise NotImplementedError

    def get_num_blocks_to_allocate(
        self, request_id: str, num_tokens: int, new_computed_blocks: GroupBlocks, total_computed_tokens: int
    ) -> int:
        return sum(
            manager.get_num_blocks_to_allocate(request_id, num_tokens, new_computed_blocks[i], total_computed_tokens)
            for i, manager in enumerate(self.single_type_managers)
        )

    def allocate_new_computed_blocks(
        self, request_id: str, new_computed_blocks: GroupBlocks, num_computed_tokens: int
    ) -> None:
        """A newly admitted request takes its hits in every group (a running one has none)."""
        if any(request_id in manager.num_cached_block for manager in self.single_type_managers):
            return
        for i, manager in enumerate(self.single_type_managers):
            manager.add_local_computed_blocks(request_id, new_computed_blocks[i], num_computed_tokens)

    def allocate_new_blocks(self, request_id: str, num_tokens: int) -> GroupBlocks:
        return tuple(manager.allocate_new_blocks(request_id, num_tokens) for manager in self.single_type_managers)

    def cache_blocks(self, request: Request, num_tokens: int, extra_keys_for: Callable[[int], tuple | None]) -> None:
        for manager in self.single_type_managers:
            if manager.enable_caching:
                manager.cache_blocks(request, num_tokens, extra_keys_for)

    def remove_skipped_blocks(self, request_id: str, num_computed_tokens: int) -> list[list[KVCacheBlock]]:
        """Each group releases what fell out of its window; returns the released blocks per group."""
        return [manager.remove_skipped_blocks(request_id, num_computed_tokens) for manager in self.single_type_managers]

    def free(self, request_id: str) -> list[list[KVCacheBlock]]:
        """Free every group's blocks, group by group; returns each group's blocks in free order."""
        return [manager.free(request_id) for manager in self.single_type_managers]

    def get_blocks(self, request_id: str) -> GroupBlocks:
        return tuple(list(manager.req_to_blocks.get(request_id) or []) for manager in self.single_type_managers)

    def reset_prefix_cache(self) -> bool:
        return bool(self.block_pool.reset_prefix_cache())


class KVCacheCoordinatorNoPrefixCache(KVCacheCoordinator):
    """Caching is off: blocks are allocated and freed per group, nothing is ever a hit."""

    def __init__(self, kv_cache_groups: Sequence[KVCacheGroupSpec], num_blocks: int,
                 free_policy: str = "vllm", events: EventLog | None = None) -> None:
        super().__init__(kv_cache_groups, num_blocks, False, free_policy, events)

    def find_longest_cache_hit(self, block_hashes: list[BlockHash], max_cache_hit_length: int) -> tuple[GroupBlocks, int]:
        return self.empty_blocks(), 0


class UnitaryKVCacheCoordinator(KVCacheCoordinator):
    """One group: its manager's own hit search is the answer."""

    def __init__(self, kv_cache_groups: Sequence[KVCacheGroupSpec], num_blocks: int, enable_caching: bool,
                 free_policy: str = "vllm", events: EventLog | None = None) -> None:
        super().__init__(kv_cache_groups, num_blocks, enable_caching, free_policy, events)
        if self.num_groups != 1:
            raise ValueError("UnitaryKVCacheCoordinator takes exactly one KV cache group")
        self.kv_cache_spec = self.kv_cache_groups[0].kv_cache_spec

    def find_longest_cache_hit(self, block_hashes: list[BlockHash], max_cache_hit_length: int) -> tuple[GroupBlocks, int]:
        manager = self.single_type_managers[0]
        hits, length = type(manager).find_longest_cache_hit(
            block_hashes, max_cache_hit_length, [0], self.block_pool, self.kv_cache_spec
        )
        return tuple(hits), length


@dataclass
class SpecGroup:
    """Groups with one spec, looked up together (vLLM's ``SpecGroup``)."""

    spec: KVCacheSpec
    group_ids: list[int]
    manager_cls: type[SingleTypeKVCacheManager]


class HybridKVCacheCoordinator(KVCacheCoordinator):
    """Several groups: the fixed-point hit search of the module docstring."""

    def __init__(self, kv_cache_groups: Sequence[KVCacheGroupSpec], num_blocks: int, enable_caching: bool,
                 free_policy: str = "vllm", events: EventLog | None = None) -> None:
        super().__init__(kv_cache_groups, num_blocks, enable_caching, free_policy, events)
        self.attention_groups: list[SpecGroup] = []
        for index, group in enumerate(self.kv_cache_groups):
            manager_cls = type(self.single_type_managers[index])
            for existing in self.attention_groups:
                if existing.spec == group.kv_cache_spec and existing.manager_cls is manager_cls:
                    existing.group_ids.append(index)
                    break
            else:
                self.attention_groups.append(SpecGroup(group.kv_cache_spec, [index], manager_cls))
        # Full attention first: its left-to-right scan bounds the others (a stable sort).
        self.attention_groups.sort(key=lambda g: not isinstance(g.spec, FullAttentionSpec))

    def find_longest_cache_hit(self, block_hashes: list[BlockHash], max_cache_hit_length: int) -> tuple[GroupBlocks, int]:
        hit_length = max_cache_hit_length
        hits_by_group: list[list[KVCacheBlock] | None] = [None] * self.num_groups
        length_by_group = [0] * self.num_groups
        is_simple_hybrid = len(self.attention_groups) == 2 and isinstance(self.attention_groups[0].spec, FullAttentionSpec)
        while True:
            candidate = hit_length
            for spec_group in self.attention_groups:
                first = spec_group.group_ids[0]
                if isinstance(spec_group.spec, FullAttentionSpec) and hits_by_group[first] is not None:
                    # Full attention's hit is downward-closed: looked up once, then only cut.
                    candidate = min(candidate, length_by_group[first])
                    continue
                hits, candidate = spec_group.manager_cls.find_longest_cache_hit(
                    block_hashes, candidate, spec_group.group_ids, self.block_pool, spec_group.spec
                )
                for group_id, blocks in zip(spec_group.group_ids, hits):
                    hits_by_group[group_id] = blocks
                    length_by_group[group_id] = candidate
            if candidate >= hit_length:
                break
            hit_length = candidate
            if is_simple_hybrid:
                break
        for spec_group in self.attention_groups:
            if not isinstance(spec_group.spec, FullAttentionSpec):
                continue
            keep = cdiv(hit_length, spec_group.spec.block_size)
            for group_id in spec_group.group_ids:
                group_hits = hits_by_group[group_id]
                if group_hits is not None:
                    del group_hits[keep:]
                    length_by_group[group_id] = hit_length
        return tuple(blocks if blocks is not None else [] for blocks in hits_by_group), hit_length


def get_kv_cache_coordinator(
    kv_cache_groups: Sequence[KVCacheGroupSpec], num_blocks: int, enable_caching: bool,
    free_policy: str = "vllm", events: EventLog | None = None,
) -> KVCacheCoordinator:
    """vLLM's choice: no caching -> no-prefix-cache; one group -> unitary; else hybrid."""
    if not enable_caching:
        return KVCacheCoordinatorNoPrefixCache(kv_cache_groups, num_blocks, free_policy, events)
    if len(kv_cache_groups) == 1:
        return UnitaryKVCacheCoordinator(kv_cache_groups, num_blocks, True, free_policy, events)
    return HybridKVCacheCoordinator(kv_cache_groups, num_blocks, True, free_policy, events)
