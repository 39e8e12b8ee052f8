"""``CPUOffloadingManager``: the host tier's bookkeeping, following vLLM 0.33's rules.

The life of a chunk:

* ``prepare_store(keys)``: keys not yet in the tier get a chunk (evicting idle chunks through the
  policy when the pool is full) and are *pending* (``ref_cnt == -1``): a lookup sees
  ``HIT_PENDING``, and they cannot be evicted. Keys already stored count as the request reusing them.
  Eviction needs enough idle chunks, else the whole store is refused (``None``).
* ``complete_store(keys)``: the copy landed; the chunks are ready (``ref_cnt == 0``) and evictable.
* ``lookup(key)``: ``HIT`` / ``HIT_PENDING`` / ``MISS``; it changes nothing.
* ``prepare_load(keys)``: pins the chunks (``ref_cnt += 1``) while they are read back;
  ``complete_load`` unpins them.
* ``on_request_finished``: one request-scoped access is handed to the policy in prefix order.

Write your own code, read vLLM's for the rules: nothing here is copied.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from engine.errors import ConfigError
from engine.kv_offload.base import (
    MEDIUM_CPU,
    ChunkStatus,
    LookupResult,
    OffloadingEvent,
    OffloadKey,
    PrepareStoreOutput,
    ReqContext,
    order_request_keys,
)
from engine.kv_offload.policies import POLICIES, CachePolicy


@dataclass
class _RequestAccess:
    """What one request did to the tier, replayed to the policy when it finishes."""

    owner: object
    generation: int
    keys: list[OffloadKey] = field(default_factory=list)
    seen: set[OffloadKey] = field(default_factory=set)
    inserted: set[OffloadKey] = field(default_factory=set)
    reused: set[OffloadKey] = field(default_factory=set)
    store_misses: set[OffloadKey] = field(default_factory=set)
    finished: bool = False


class CPUOffloadingManager:
    """A pool of ``num_chunks`` host chunks, organised and evicted by an LRU or ARC policy."""

    medium = MEDIUM_CPU

    def __init__(self, num_chunks: int, cache_policy: str = "lru", enable_events: bool = False) -> None:
        if cache_policy not in POLICIES:
            raise ConfigError(f"Unknown KV offloading policy {cache_policy!r}; choose one of {sorted(POLICIES)}.")
        if num_chunks < 0:
            raise ConfigError(f"The KV offloading tier needs a size >= 0 chunks, got {num_chunks}.")
        self.num_chunks = num_chunks
        self.cache_policy = cache_policy
        self.policy: CachePolicy = POLICIES[cache_policy](num_chunks)
        self.events: list[OffloadingEvent] | None = [] if enable_events else None
        self._num_allocated = 0
        self._free_list: list[int] = []
        self._num_evictable = 0
        self._num_pending = 0
        self._generation = 0

    # -- chunk pool -------------------------------------------------------------------------------
    @property
    def num_free_chunks(self) -> int:
        return len(self._free_list) + self.num_chunks - self._num_allocated

    @property
    def num_stored_chunks(self) -> int:
        return self._num_allocated - len(self._free_list)

    def _allocate(self, n: int) -> list[ChunkStatus]:
        """Never-used chunks first (in id order), then freed ones, last freed first."""
        fresh = min(n, self.num_chunks - self._num_allocated)
        chunks = [ChunkStatus(self._num_allocated + i) for i in range(fresh)]
        self._num_allocated += fresh
        chunks += [ChunkStatus(self._free_list.pop()) for _ in range(n - fresh)]
        return chunks

    # -- per-request access -----------------------------------------------------------------------
    def _access(self, req_context: ReqContext) -> _RequestAccess:
        access = req_context.state.get("access")
        if access is None or access.owner is not self or access.generation != self._generation:
            access = _RequestAccess(self, self._generation)
            req_context.state["access"] = access
        return access

    def _record_access(self, keys: Iterable[OffloadKey], req_context: ReqContext,
                       reused: Iterable[OffloadKey] = ()) -> None:
        access = self._access(req_context)
        new = [k for k in keys if k not in access.seen]
        if new and access.finished:
            raise RuntimeError("A finished request offered new keys to the offloading tier.")
        access.keys += new
        access.seen.update(new)
        if new:
            self.policy.on_request_access(new, req_context)
        access.reused.update(k for k in reused if k not in access.inserted)

    # -- the manager's interface ------------------------------------------------------------------
    def on_new_request(self, req_context: ReqContext) -> None:
        self._access(req_context)

    def lookup(self, key: OffloadKey, req_context: ReqContext | None = None) -> LookupResult:
        chunk = self.policy.get(key)
        if chunk is None:
            return LookupResult.MISS
        return LookupResult.HIT if chunk.is_ready else LookupResult.HIT_PENDING

    def prepare_load(self, keys: Collection[OffloadKey], req_context: ReqContext) -> list[int]:
        """Pin ``keys`` (all ready) for reading; returns their chunk ids in order."""
        chunk_ids = []
        for key in keys:
            chunk = self.policy.get(key)
            if chunk is None or not chunk.is_ready:
                raise RuntimeError(f"Offloaded chunk {key.hex()[:12]} is not ready to load.")
            if chunk.ref_cnt == 0:
                self.policy.mark_non_evictable(key)
                self._num_evictable -= 1
            chunk.ref_cnt += 1
            chunk_ids.append(chunk.chunk_id)
        self._record_access(keys, req_context, reused=keys)
        return chunk_ids

    def touch(self, keys: Collection[OffloadKey], req_context: ReqContext) -> None:
        self.policy.touch(keys, req_context)

    def complete_load(self, keys: Collection[OffloadKey], req_context: ReqContext) -> None:
        for key in keys:
            chunk = self.policy.get(key)
            if chunk is None or chunk.ref_cnt <= 0:
                raise RuntimeError(f"Offloaded chunk {key.hex()[:12]} was not being loaded.")
            chunk.ref_cnt -= 1
            if chunk.ref_cnt == 0:
                self._num_evictable += 1
                self.policy.mark_evictable(key)

    def prepare_store(self, keys: Collection[OffloadKey], req_context: ReqContext) -> PrepareStoreOutput | None:
        keys = list(keys)
        to_store: list[OffloadKey] = []
        ready: list[OffloadKey] = []
        for key in keys:
            chunk = self.policy.get(key)
            if chunk is None:
                to_store.append(key)
            elif chunk.is_ready:
                ready.append(key)
        access = self._access(req_context)
        misses = [k for k in to_store if k not in access.store_misses]
        if misses:  # before insertion removes the keys from ARC's ghost lists
            self.policy.on_store_miss(misses, req_context)
            access.store_misses.update(misses)
        recorded = set(to_store) | set(ready)
        self._record_access([k for k in keys if k in recorded], req_context, reused=ready)
        if not to_store:
            return PrepareStoreOutput([], [], [])

        shortfall = len(to_store) - self.num_free_chunks
        evicted: list[OffloadKey] = []
        if shortfall > 0:
            if shortfall > self._num_evictable:
                return None
            victims = self.policy.evict(shortfall, set(keys))
            if victims is None:
                return None
            self._num_evictable -= len(victims)
            for key, chunk in victims:
                self._free_list.append(chunk.chunk_id)
                evicted.append(key)
            if self.events is not None:
                self.events.append(OffloadingEvent(evicted, self.medium, removed=True))
        chunks = self._allocate(len(to_store))
        for key, chunk in zip(to_store, chunks):
            self.policy.insert(key, chunk, req_context)
        self._num_pending += len(to_store)
        access.inserted.update(to_store)
        return PrepareStoreOutput(to_store, [c.chunk_id for c in chunks], evicted)

    def complete_store(self, keys: Collection[OffloadKey], req_context: ReqContext | None = None,
                       success: bool = True) -> None:
        """The copies landed (``success``): the chunks become loadable; else they are dropped."""
        done: list[OffloadKey] = []
        for key in keys:
            chunk = self.policy.get(key)
            if chunk is None or chunk.is_ready:
                continue
            self._num_pending -= 1
            if success:
                chunk.ref_cnt = 0
                self._num_evictable += 1
                self.policy.mark_evictable(key)
            else:
                self.policy.remove(key)
                self._free_list.append(chunk.chunk_id)
            done.append(key)
        if done and success and self.events is not None:
            self.events.append(OffloadingEvent(done, self.medium, removed=False))

    def on_request_finished(self, req_context: ReqContext) -> None:
        access = req_context.state.get("access")
        if access is None or access.owner is not self or access.generation != self._generation or access.finished:
            return
        access.finished = True
        self.policy.on_request_finished(order_request_keys(access.keys, req_context),
                                        access.inserted - access.reused, access.reused, req_context)

    def reset_cache(self) -> None:
        """Forget every chunk (``reset_prefix_cache`` with the tier on)."""
        self.policy.clear()
        self._generation += 1
        self._num_evictable = self._num_pending = self._num_allocated = 0
        self._free_list.clear()

    def take_events(self) -> list[OffloadingEvent]:
        if self.events is None:
            return []
        events, self.events = self.events, []
        return events

    @property
    def usage(self) -> float:
        """Fraction of chunks holding a block (stored or being stored)."""
        return self.num_stored_chunks / self.num_chunks if self.num_chunks else 0.0
