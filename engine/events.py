"""Typed events, and a timeline that rebuilds the cache state at any event.

The cache emits two families of events:

* vLLM's KV events, with vLLM's names and fields: :class:`BlockStored`,
  :class:`BlockRemoved`, :class:`AllBlocksCleared` (plus ``block_ids`` / ``request_id``,
  which vLLM leaves out but a picture of the block pool needs).
* Finer *teaching* events: a request arrives, looks itself up, touches its hits, gets
  new blocks, frees them (saying which went to the head and which to the tail of the
  free queue), is preempted, finishes.

Together they describe every state change, so :class:`Timeline` can replay them onto a
plain-data :class:`CacheSnapshot`. The UI is driven only by this log: any step can be
rebuilt, scrubbed backwards, or shared as (scenario, step).
"""

from __future__ import annotations

import bisect
import copy
from dataclasses import dataclass, field
from typing import ClassVar

BlockHash = bytes
MEDIUM_GPU = "GPU"


@dataclass(frozen=True)
class Event:
    """Base class. ``kind`` is a short stable name the UI and tests filter on."""

    kind: ClassVar[str] = "event"


# -- vLLM's KV events ---------------------------------------------------------------------
@dataclass(frozen=True)
class BlockStored(Event):
    """Newly full blocks got their hashes and entered the hash table (one event per call)."""

    kind: ClassVar[str] = "stored"
    block_hashes: list[BlockHash]
    parent_block_hash: BlockHash | None
    token_ids: list[int]
    block_size: int
    lora_name: str | None
    medium: str = MEDIUM_GPU
    block_ids: list[int] = field(default_factory=list)
    request_id: str | None = None


@dataclass(frozen=True)
class BlockRemoved(Event):
    """A cached block was evicted: popped from the free queue while still carrying a hash."""

    kind: ClassVar[str] = "evicted"
    block_hashes: list[BlockHash]
    medium: str = MEDIUM_GPU
    block_ids: list[int] = field(default_factory=list)
    request_id: str | None = None  # whose allocation needed the block


@dataclass(frozen=True)
class AllBlocksCleared(Event):
    """``reset_prefix_cache`` emptied the hash table and cleared every block's hash."""

    kind: ClassVar[str] = "cleared"
    medium: str = MEDIUM_GPU


# -- teaching events ----------------------------------------------------------------------
@dataclass(frozen=True)
class RequestArrived(Event):
    kind: ClassVar[str] = "arrived"
    request_id: str
    num_prompt_tokens: int
    prompt_token_ids: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class CacheLookup(Event):
    """``get_computed_blocks``: which blocks hit, and where the chain of hits stopped.

    ``first_miss_block_index`` is the index of the first full block that missed, or
    ``None`` when the lookup stopped for another reason (``stop_reason``).
    """

    kind: ClassVar[str] = "lookup"
    request_id: str
    hit_block_ids: list[int]
    num_hit_tokens: int
    num_full_blocks: int
    max_hit_blocks: int
    first_miss_block_index: int | None
    stop_reason: str


@dataclass(frozen=True)
class BlocksTouched(Event):
    """Hit blocks joined a request; those with ``ref_cnt == 0`` left the free queue."""

    kind: ClassVar[str] = "touch"
    request_id: str
    block_ids: list[int]
    revived_block_ids: list[int]


@dataclass(frozen=True)
class BlocksAllocated(Event):
    """New blocks popped from the head of the free queue for a request."""

    kind: ClassVar[str] = "allocate"
    request_id: str
    block_ids: list[int]


@dataclass(frozen=True)
class BlocksFreed(Event):
    """A request released its blocks (in reverse order); those reaching ref 0 re-entered the queue."""

    kind: ClassVar[str] = "free"
    request_id: str
    block_ids: list[int]
    prepended_block_ids: list[int]  # to the head: reused first
    appended_block_ids: list[int]  # to the tail: most recently used


@dataclass(frozen=True)
class RequestScheduled(Event):
    kind: ClassVar[str] = "schedule"
    request_id: str
    num_new_tokens: int
    num_computed_tokens: int  # before this step


@dataclass(frozen=True)
class TokenGenerated(Event):
    kind: ClassVar[str] = "token"
    request_id: str
    token_id: int


@dataclass(frozen=True)
class RequestPreempted(Event):
    kind: ClassVar[str] = "preempt"
    request_id: str


@dataclass(frozen=True)
class RequestFinished(Event):
    kind: ClassVar[str] = "finish"
    request_id: str
    reason: str


@dataclass(frozen=True)
class StepStarted(Event):
    kind: ClassVar[str] = "step"
    step: int


class EventLog:
    """Append-only list of events, with a cursor for :meth:`take` (vLLM's ``take_events``)."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.events: list[Event] = []
        self._taken = 0

    def emit(self, event: Event) -> None:
        if self.enabled:
            self.events.append(event)

    def take(self) -> list[Event]:
        """Events emitted since the previous ``take`` (the full history stays in ``events``)."""
        new = self.events[self._taken :]
        self._taken = len(self.events)
        return new

    def __len__(self) -> int:
        return len(self.events)


# -- snapshots and the timeline -------------------------------------------------------------
@dataclass
class CacheSnapshot:
    """The whole cache as plain data: what a picture of the block pool needs.

    ``free_queue`` is head -> tail (the head is the next block reused); ``hash_table``
    maps a hash to the blocks holding it, first inserted first; ``block_tables`` maps a
    live request to its physical blocks in logical order.
    """

    num_blocks: int
    event_index: int = 0  # how many events have been applied
    ref_cnt: list[int] = field(default_factory=list)
    block_hash: list[BlockHash | None] = field(default_factory=list)
    free_queue: list[int] = field(default_factory=list)
    hash_table: dict[BlockHash, list[int]] = field(default_factory=dict)
    block_tables: dict[str, list[int]] = field(default_factory=dict)
    request_status: dict[str, str] = field(default_factory=dict)
    num_evictions: int = 0

    @classmethod
    def initial(cls, num_blocks: int) -> CacheSnapshot:
        return cls(
            num_blocks=num_blocks,
            ref_cnt=[0] * num_blocks,
            block_hash=[None] * num_blocks,
            free_queue=list(range(1, num_blocks)),
        )

    def copy(self) -> CacheSnapshot:
        return copy.deepcopy(self)

    def owners(self, block_id: int) -> list[str]:
        return [rid for rid, table in self.block_tables.items() if block_id in table]

    @property
    def next_victim(self) -> int | None:
        """The block the next allocation takes (head of the free queue)."""
        return self.free_queue[0] if self.free_queue else None

    @property
    def usage(self) -> float:
        return 1.0 - len(self.free_queue) / max(1, self.num_blocks - 1)

    def apply(self, event: Event) -> None:
        """Advance this snapshot by one event (events that change no cache state are no-ops)."""
        self.event_index += 1
        if isinstance(event, BlocksTouched):
            for block_id in event.block_ids:
                if self.ref_cnt[block_id] == 0:
                    self.free_queue.remove(block_id)
                self.ref_cnt[block_id] += 1
            self.block_tables.setdefault(event.request_id, []).extend(event.block_ids)
        elif isinstance(event, BlocksAllocated):
            for block_id in event.block_ids:
                self.free_queue.remove(block_id)
                self.ref_cnt[block_id] = 1
            self.block_tables.setdefault(event.request_id, []).extend(event.block_ids)
        elif isinstance(event, BlockRemoved):
            for block_id, block_hash in zip(event.block_ids, event.block_hashes):
                holders = self.hash_table.get(block_hash, [])
                if block_id in holders:
                    holders.remove(block_id)
                if not holders:
                    self.hash_table.pop(block_hash, None)
                self.block_hash[block_id] = None
                self.num_evictions += 1
        elif isinstance(event, BlockStored):
            for block_id, block_hash in zip(event.block_ids, event.block_hashes):
                self.block_hash[block_id] = block_hash
                self.hash_table.setdefault(block_hash, []).append(block_id)
        elif isinstance(event, BlocksFreed):
            for block_id in event.block_ids:
                self.ref_cnt[block_id] -= 1
            self.free_queue[:0] = event.prepended_block_ids
            self.free_queue.extend(event.appended_block_ids)
            self.block_tables.pop(event.request_id, None)
        elif isinstance(event, AllBlocksCleared):
            self.hash_table.clear()
            self.block_hash = [None] * self.num_blocks
        elif isinstance(event, RequestArrived):
            self.request_status[event.request_id] = "waiting"
        elif isinstance(event, RequestScheduled):
            self.request_status[event.request_id] = "running"
        elif isinstance(event, RequestPreempted):
            self.request_status[event.request_id] = "preempted"
        elif isinstance(event, RequestFinished):
            self.request_status[event.request_id] = "finished"


class Timeline:
    """Rebuild the cache state at any event index, forwards or backwards, cheaply.

    Keeps a full snapshot every ``checkpoint_every`` events and replays at most that many
    events from the nearest checkpoint; a step of one event from the last answer is a
    single ``apply``. No deep copy of the world per event.
    """

    def __init__(self, num_blocks: int, events: list[Event], checkpoint_every: int = 64) -> None:
        self.num_blocks = num_blocks
        self.events = events  # may be the live list of an EventLog: it grows as the engine runs
        self.checkpoint_every = checkpoint_every
        self._checkpoints: list[CacheSnapshot] = [CacheSnapshot.initial(num_blocks)]
        self._cursor: CacheSnapshot = self._checkpoints[0].copy()

    def __len__(self) -> int:
        return len(self.events)

    def _extend_checkpoints(self, upto: int) -> None:
        last = self._checkpoints[-1]
        while last.event_index + self.checkpoint_every <= upto:
            state = last.copy()
            for event in self.events[state.event_index : state.event_index + self.checkpoint_every]:
                state.apply(event)
            self._checkpoints.append(state)
            last = state

    def state_at(self, index: int) -> CacheSnapshot:
        """State after the first ``index`` events (0 = empty cache). Do not mutate the result."""
        index = max(0, min(index, len(self.events)))
        if not (self._cursor.event_index <= index < self._cursor.event_index + self.checkpoint_every):
            self._extend_checkpoints(index)
            keys = [c.event_index for c in self._checkpoints]
            self._cursor = self._checkpoints[bisect.bisect_right(keys, index) - 1].copy()
        for event in self.events[self._cursor.event_index : index]:
            self._cursor.apply(event)
        return self._cursor

    def find_next(self, index: int, kinds: set[str]) -> int | None:
        """Index just *after* the next event of one of ``kinds`` at or beyond ``index``."""
        for i in range(index, len(self.events)):
            if self.events[i].kind in kinds:
                return i + 1
        return None

    def find_previous(self, index: int, kinds: set[str]) -> int | None:
        """Index just after the last event of one of ``kinds`` strictly before ``index - 1``."""
        for i in range(min(index, len(self.events)) - 2, -1, -1):
            if self.events[i].kind in kinds:
                return i + 1
        return None
