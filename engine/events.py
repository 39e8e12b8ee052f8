"""Typed events and the append-only event log (replay and queries live in :mod:`engine.timeline`).

The cache emits two families of events:

* vLLM's KV events, with vLLM's names and fields: :class:`BlockStored`,
  :class:`BlockRemoved`, :class:`AllBlocksCleared` (plus ``block_ids`` / ``request_id``,
  which vLLM leaves out but a picture of the block pool needs).
* Finer *teaching* events: a request arrives, looks itself up, touches its hits, gets
  new blocks, frees them (saying which went to the head and which to the tail of the
  free queue), is preempted, finishes.

Together they describe every state change, so :class:`engine.timeline.Timeline` can replay
them onto a plain-data :class:`engine.timeline.CacheSnapshot`. The UI is driven only by this log: any step can be
rebuilt, scrubbed backwards, or shared as (scenario, step).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from engine.hashing import BlockHash, external_block_hash

MEDIUM_GPU = "GPU"
#: The defaults for one KV cache group of full attention; a hybrid model's groups set their own.
KV_CACHE_GROUP_IDX = 0
KV_CACHE_SPEC_KIND = "full_attention"


@dataclass(frozen=True)
class Event:
    """Base class. ``kind`` is a short stable name the UI and tests filter on."""

    kind: ClassVar[str] = "event"


# -- vLLM's KV events ---------------------------------------------------------------------
@dataclass(frozen=True)
class BlockStored(Event):
    """Newly full blocks got their hashes and entered the hash table (one event per call).

    ``block_hashes`` / ``parent_block_hash`` are the full digests; :meth:`published` gives
    the fields as vLLM puts them on the wire (hashes as 64-bit ints). ``extra_keys`` has
    one entry per block, untagged, as vLLM publishes them.
    """

    kind: ClassVar[str] = "stored"
    block_hashes: list[BlockHash]
    parent_block_hash: BlockHash | None
    token_ids: list[int]
    block_size: int
    lora_name: str | None
    medium: str = MEDIUM_GPU
    lora_id: int | None = None
    extra_keys: list[tuple | None] | None = None
    block_ids: list[int] = field(default_factory=list)
    request_id: str | None = None
    group_idx: int = KV_CACHE_GROUP_IDX
    kv_cache_spec_kind: str = KV_CACHE_SPEC_KIND
    kv_cache_spec_sliding_window: int | None = None

    def published(self) -> dict[str, Any]:
        """vLLM's ``BlockStored`` fields (the group and its spec as vLLM 0.33 annotates them)."""
        return {
            "block_hashes": [external_block_hash(h) for h in self.block_hashes],
            "parent_block_hash": None if self.parent_block_hash is None else external_block_hash(self.parent_block_hash),
            "token_ids": list(self.token_ids),
            "block_size": self.block_size,
            "lora_id": self.lora_id,
            "medium": self.medium,
            "lora_name": self.lora_name,
            "extra_keys": None if self.extra_keys is None else list(self.extra_keys),
            "group_idx": self.group_idx,
            "kv_cache_spec_kind": self.kv_cache_spec_kind,
            "kv_cache_spec_sliding_window": self.kv_cache_spec_sliding_window,
        }


@dataclass(frozen=True)
class BlockRemoved(Event):
    """A cached block was evicted: popped from the free queue while still carrying a hash."""

    kind: ClassVar[str] = "evicted"
    block_hashes: list[BlockHash]
    medium: str = MEDIUM_GPU
    block_ids: list[int] = field(default_factory=list)
    request_id: str | None = None  # whose allocation needed the block
    group_idx: int = KV_CACHE_GROUP_IDX

    def published(self) -> dict[str, Any]:
        """vLLM's ``BlockRemoved`` fields."""
        return {
            "block_hashes": [external_block_hash(h) for h in self.block_hashes],
            "medium": self.medium,
            "group_idx": self.group_idx,
        }


@dataclass(frozen=True)
class AllBlocksCleared(Event):
    """``reset_prefix_cache`` emptied the hash table and cleared every block's hash."""

    kind: ClassVar[str] = "cleared"
    medium: str = MEDIUM_GPU

    def published(self) -> dict[str, Any]:
        """vLLM's ``AllBlocksCleared`` has no fields."""
        return {}


#: The vLLM KV events, by class name (what a publisher encodes; the teaching events stay local).
KV_EVENT_TYPES = (BlockStored, BlockRemoved, AllBlocksCleared)


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
class BlocksReleased(Event):
    """A sliding-window group gave back blocks its window left behind (null in their place).

    The request keeps running; ``block_ids`` are in the order freed (last skipped block first).
    """

    kind: ClassVar[str] = "release"
    request_id: str
    group_idx: int
    block_ids: list[int]
    prepended_block_ids: list[int]
    appended_block_ids: list[int]


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

    def drop_taken(self) -> None:
        """Forget the events already taken: a long-running server keeps no history, the app does."""
        del self.events[: self._taken]
        self._taken = 0

    def __len__(self) -> int:
        return len(self.events)
