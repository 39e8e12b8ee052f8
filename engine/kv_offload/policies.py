"""Which host chunk to evict when the tier is full: vLLM 0.33's LRU and ARC rules.

Both policies only ever evict *idle* chunks (``ref_cnt == 0``: stored and not being loaded), and
never a key the current store offered (``protected``). They differ in what "recently used" means:

* **LRU** keeps one rank per chunk; the lowest rank goes first. A request's accesses are ranked
  together (one request rank, later positions first), so when a request finishes its whole prefix
  is refreshed tail to head: the head block, needed by every continuation, is the most recent.
* **ARC** splits chunks into T1 (seen once) and T2 (reused), keeps ghost lists B1/B2 of what each
  lost, and moves its target size of T1 towards whichever ghost list a new store hits.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Iterable, Sequence

from engine.kv_offload.base import ChunkStatus, OffloadKey, ReqContext

Rank = tuple[int, int]


class CachePolicy(ABC):
    """Organises the chunks and picks eviction victims; the manager owns ref counts and the pool."""

    def __init__(self, cache_capacity: int) -> None:
        self.cache_capacity = cache_capacity

    @abstractmethod
    def get(self, key: OffloadKey) -> ChunkStatus | None: ...

    @abstractmethod
    def insert(self, key: OffloadKey, chunk: ChunkStatus, req_context: ReqContext) -> None: ...

    @abstractmethod
    def remove(self, key: OffloadKey) -> None: ...

    @abstractmethod
    def touch(self, keys: Iterable[OffloadKey], req_context: ReqContext) -> None: ...

    @abstractmethod
    def evict(self, n: int, protected: set[OffloadKey]) -> list[tuple[OffloadKey, ChunkStatus]] | None:
        """Exactly ``n`` idle, unprotected victims, or ``None`` with nothing changed."""

    @abstractmethod
    def clear(self) -> None: ...

    @abstractmethod
    def order(self) -> list[OffloadKey]:
        """Every resident key, next victim first (for pictures and the differential)."""

    def on_store_miss(self, keys: Iterable[OffloadKey], req_context: ReqContext) -> None:
        self.touch(keys, req_context)

    def on_request_access(self, keys: Iterable[OffloadKey], req_context: ReqContext) -> None:
        return

    def on_request_finished(self, keys: Sequence[OffloadKey], insertion_only: set[OffloadKey],
                            reused: set[OffloadKey], req_context: ReqContext) -> None:
        self.touch(keys, req_context)

    def mark_evictable(self, key: OffloadKey) -> None:
        return

    def mark_non_evictable(self, key: OffloadKey) -> None:
        return


class LRUCachePolicy(CachePolicy):
    """Evict the idle chunk with the lowest rank ``(counter, -position)``."""

    def __init__(self, cache_capacity: int) -> None:
        super().__init__(cache_capacity)
        self.chunks: dict[OffloadKey, ChunkStatus] = {}
        self.ranks: dict[OffloadKey, Rank] = {}
        self.evictable: set[OffloadKey] = set()
        self.counter = 0
        self.generation = 0

    def _request_rank(self, req_context: ReqContext) -> int:
        """One rank per request (per policy and clear()), drawn the first time the request needs it."""
        mine = req_context.state.get("lru_rank")
        if mine is None or mine[0] is not self or mine[1] != self.generation:
            self.counter += 1
            mine = (self, self.generation, self.counter)
            req_context.state["lru_rank"] = mine
        return mine[2]

    def _refresh(self, keys: Iterable[OffloadKey]) -> None:
        for key in keys:
            if key in self.chunks:
                self.counter += 1
                self.ranks[key] = (self.counter, 0)

    def get(self, key: OffloadKey) -> ChunkStatus | None:
        return self.chunks.get(key)

    def insert(self, key: OffloadKey, chunk: ChunkStatus, req_context: ReqContext) -> None:
        self.chunks[key] = chunk
        position = req_context.get_offload_key_position(key)
        if position is None:
            self.counter += 1
            self.ranks[key] = (self.counter, 0)
        else:
            self.ranks[key] = (self._request_rank(req_context), -position)
        if chunk.ref_cnt == 0:
            self.evictable.add(key)

    def remove(self, key: OffloadKey) -> None:
        del self.chunks[key]
        self.ranks.pop(key, None)
        self.evictable.discard(key)

    def touch(self, keys: Iterable[OffloadKey], req_context: ReqContext) -> None:
        self._refresh(reversed(list(keys)))

    def on_request_access(self, keys: Iterable[OffloadKey], req_context: ReqContext) -> None:
        request_rank = self._request_rank(req_context)
        for key in keys:
            position = req_context.get_offload_key_position(key)
            if position is None or key not in self.chunks:
                continue
            rank = (request_rank, -position)
            if self.ranks[key] < rank:  # only ever moves a chunk later
                self.ranks[key] = rank

    def on_request_finished(self, keys: Sequence[OffloadKey], insertion_only: set[OffloadKey],
                            reused: set[OffloadKey], req_context: ReqContext) -> None:
        self._refresh(reversed(list(keys)))

    def evict(self, n: int, protected: set[OffloadKey]) -> list[tuple[OffloadKey, ChunkStatus]] | None:
        if n == 0:
            return []
        victims = sorted((self.ranks[k], k) for k in self.evictable if k not in protected)[:n]
        if len(victims) < n:
            return None
        out = []
        for _, key in victims:
            out.append((key, self.chunks[key]))
            self.remove(key)
        return out

    def clear(self) -> None:
        self.chunks.clear()
        self.ranks.clear()
        self.evictable.clear()
        self.counter = 0
        self.generation += 1

    def order(self) -> list[OffloadKey]:
        return [k for _, k in sorted((r, k) for k, r in self.ranks.items())]

    def mark_evictable(self, key: OffloadKey) -> None:
        self.evictable.add(key)

    def mark_non_evictable(self, key: OffloadKey) -> None:
        self.evictable.remove(key)


class ARCCachePolicy(CachePolicy):
    """Adaptive Replacement Cache over T1/T2 with ghost lists B1/B2 and a target size for T1."""

    def __init__(self, cache_capacity: int) -> None:
        super().__init__(cache_capacity)
        self.target_t1_size = 0.0
        self.t1: OrderedDict[OffloadKey, ChunkStatus] = OrderedDict()
        self.t2: OrderedDict[OffloadKey, ChunkStatus] = OrderedDict()
        self.b1: OrderedDict[OffloadKey, None] = OrderedDict()
        self.b2: OrderedDict[OffloadKey, None] = OrderedDict()

    def get(self, key: OffloadKey) -> ChunkStatus | None:
        found = self.t1.get(key)
        return found if found is not None else self.t2.get(key)

    def insert(self, key: OffloadKey, chunk: ChunkStatus, req_context: ReqContext) -> None:
        self.t1[key] = chunk
        self.b1.pop(key, None)
        self.b2.pop(key, None)

    def remove(self, key: OffloadKey) -> None:
        if self.t1.pop(key, None) is None:
            self.t2.pop(key, None)

    def _ghost_hit(self, key: OffloadKey) -> None:
        """A key remembered in B1 grows T1's target; one in B2 shrinks it."""
        if key in self.b1:
            self.target_t1_size = min(self.target_t1_size + max(1, len(self.b2) / len(self.b1)), self.cache_capacity)
            self.b1.move_to_end(key)
        elif key in self.b2:
            self.target_t1_size = max(self.target_t1_size - max(1, len(self.b1) / len(self.b2)), 0)
            self.b2.move_to_end(key)

    def on_store_miss(self, keys: Iterable[OffloadKey], req_context: ReqContext) -> None:
        for key in reversed(list(keys)):
            self._ghost_hit(key)

    def touch(self, keys: Iterable[OffloadKey], req_context: ReqContext) -> None:
        for key in reversed(list(keys)):
            if key in self.t1:
                chunk = self.t1.pop(key)
                (self.t2 if chunk.is_ready else self.t1)[key] = chunk  # a pending store is not a reuse
            elif key in self.t2:
                self.t2.move_to_end(key)
            else:
                self._ghost_hit(key)

    def on_request_finished(self, keys: Sequence[OffloadKey], insertion_only: set[OffloadKey],
                            reused: set[OffloadKey], req_context: ReqContext) -> None:
        for key in reversed(list(keys)):
            if key in insertion_only:  # storing is not a second use: stay in T1, refresh recency
                if key in self.t1:
                    self.t1.move_to_end(key)
                elif key in self.t2:
                    self.t2.move_to_end(key)
            elif key in reused:
                if key in self.t1:
                    self.t2[key] = self.t1.pop(key)
                elif key in self.t2:
                    self.t2.move_to_end(key)

    def evict(self, n: int, protected: set[OffloadKey]) -> list[tuple[OffloadKey, ChunkStatus]] | None:
        if n == 0:
            return []

        def idle(entries: OrderedDict[OffloadKey, ChunkStatus]) -> list[OffloadKey]:
            return [k for k, c in entries.items() if c.ref_cnt == 0 and k not in protected]

        t1_idle, t2_idle = idle(self.t1), idle(self.t2)
        i1 = i2 = 0
        t1_size = len(self.t1)
        picked: list[tuple[OffloadKey, bool]] = []  # (key, from T1)
        for _ in range(n):
            if t1_size >= int(self.target_t1_size) and i1 < len(t1_idle):
                picked.append((t1_idle[i1], True))
                i1, t1_size = i1 + 1, t1_size - 1
            elif i2 < len(t2_idle):
                picked.append((t2_idle[i2], False))
                i2 += 1
            elif i1 < len(t1_idle):
                picked.append((t1_idle[i1], True))
                i1, t1_size = i1 + 1, t1_size - 1
            else:
                return None
        out = []
        for key, from_t1 in picked:
            if from_t1:
                out.append((key, self.t1.pop(key)))
                self.b1[key] = None
            else:
                out.append((key, self.t2.pop(key)))
                self.b2[key] = None
        for ghost in (self.b1, self.b2):
            while len(ghost) > self.cache_capacity:
                ghost.popitem(last=False)
        return out

    def clear(self) -> None:
        for part in (self.t1, self.t2, self.b1, self.b2):
            part.clear()
        self.target_t1_size = 0.0

    def order(self) -> list[OffloadKey]:
        return list(self.t1) + list(self.t2)


POLICIES: dict[str, type[CachePolicy]] = {"lru": LRUCachePolicy, "arc": ARCCachePolicy}
