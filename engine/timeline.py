"""Replay of the event log: the cache state at any event, and every query over the log.

The UI is driven only by the log: any step can be rebuilt, scrubbed backwards, or shared as
(scenario, step). Queries that need more than a snapshot (the tokens behind a hash, which
blocks were hits) read the events here too, so there is one place that interprets them.
"""

from __future__ import annotations

import bisect
import copy
from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.events import (
    AllBlocksCleared,
    BlockHash,
    BlockRemoved,
    BlocksAllocated,
    BlocksFreed,
    BlocksReleased,
    BlockStored,
    BlocksTouched,
    Event,
    RequestArrived,
    RequestFinished,
    RequestPreempted,
    RequestScheduled,
)


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
        elif isinstance(event, BlocksReleased):
            for block_id in event.block_ids:
                self.ref_cnt[block_id] -= 1
            self.free_queue[:0] = event.prepended_block_ids
            self.free_queue.extend(event.appended_block_ids)
            released = set(event.block_ids)
            table = self.block_tables.get(event.request_id, [])
            self.block_tables[event.request_id] = [0 if b in released else b for b in table]
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


# -- queries over the log ------------------------------------------------------------------
def block_contents(events: Sequence[Event]) -> dict[bytes, list[int]]:
    """hash -> the token ids of that block (a hash fixes its tokens, so the whole log is safe to use)."""
    contents: dict[bytes, list[int]] = {}
    for event in events:
        if isinstance(event, BlockStored) and event.block_size:  # the tier's events carry hashes only
            size = event.block_size
            for i, block_hash in enumerate(event.block_hashes):
                contents[block_hash] = list(event.token_ids[i * size : (i + 1) * size])
    return contents


def hit_blocks(events: Sequence[Event], upto: int) -> dict[str, set[int]]:
    """request id -> the blocks it got from the cache (touched), for requests live after ``upto`` events."""
    hits: dict[str, set[int]] = {}
    for event in events[:upto]:
        note_hits(hits, event)
    return hits


def note_hits(hits: dict[str, set[int]], event: Event) -> None:
    """Move :func:`hit_blocks`'s answer on by one event (a whole timeline walks the log once this way)."""
    if isinstance(event, BlocksTouched):
        hits.setdefault(event.request_id, set()).update(event.block_ids)
    elif isinstance(event, BlocksFreed):
        hits.pop(event.request_id, None)
