"""vLLM's KV block residency metrics (``--kv-cache-metrics``), read off the cache's event log.

vLLM samples a fraction of device blocks when they are allocated; for each sampled block it keeps
the birth time, the last access and its last four accesses, and when the block's cached contents
are evicted it reports three things: the lifetime (allocation to eviction), the idle time before
eviction, and the gaps between consecutive accesses. Each step's events here carry the same
moments: ``BlocksAllocated`` (a block leaves the free queue for new contents), ``BlocksTouched``
(a cache hit takes a block), ``BlockRemoved`` on the GPU medium (its contents are evicted), and
``AllBlocksCleared`` (reset). Times are the step's, which is when vLLM's calls happen too.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from engine.events import MEDIUM_GPU, AllBlocksCleared, BlockRemoved, BlocksAllocated, BlocksTouched, Event

#: vLLM's ``kv_cache_residency`` buckets (seconds): millisecond reuse gaps up to 30-minute lifetimes.
KV_CACHE_RESIDENCY_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60,
                              120, 300, 600, 1200, 1800)


@dataclass
class _Block:
    born: float
    last_access: float
    accesses: deque[float] = field(default_factory=lambda: deque(maxlen=4))


@dataclass
class Eviction:
    lifetime_s: float
    idle_s: float
    reuse_gaps_s: list[float]


class KVCacheResidency:
    def __init__(self, sample_rate: float = 0.01, seed: int | None = None) -> None:
        self.sample_rate = sample_rate
        self._rng = random.Random(seed)
        self._blocks: dict[int, _Block] = {}

    def observe(self, events: Iterable[Event], now: float) -> list[Eviction]:
        """Apply one step's events; returns the evictions of sampled blocks."""
        out: list[Eviction] = []
        # The log says "allocated" before "evicted" for the same block; vLLM evicts the old contents
        # first, then samples the block anew. Keep the old state aside until its eviction is seen.
        previous: dict[int, _Block] = {}
        for event in events:
            if isinstance(event, BlocksAllocated):
                for block_id in event.block_ids:
                    old = self._blocks.pop(block_id, None)
                    if old is not None:
                        previous[block_id] = old
                    if self._rng.random() < self.sample_rate:
                        self._blocks[block_id] = _Block(now, now)
            elif isinstance(event, BlocksTouched):
                for block_id in event.block_ids:
                    state = self._blocks.get(block_id)
                    if state is not None:
                        state.last_access = now
                        state.accesses.append(now)
            elif isinstance(event, BlockRemoved) and event.medium == MEDIUM_GPU:
                for block_id in event.block_ids:
                    state = previous.pop(block_id, None)
                    if state is not None:
                        gaps = list(state.accesses)
                        out.append(Eviction(now - state.born, now - state.last_access,
                                            [b - a for a, b in zip(gaps, gaps[1:])]))
            elif isinstance(event, AllBlocksCleared):
                self._blocks.clear()
        return out
