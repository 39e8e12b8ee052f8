"""What a replica's prefix cache holds, rebuilt from its KV events alone.

vLLM's events name blocks by hash, never by physical block: ``BlockStored`` says "these full blocks
(hashes, in chain order) now hold these tokens, and the first one follows ``parent_block_hash``";
``BlockRemoved`` says "these hashes were evicted"; ``AllBlocksCleared`` empties the cache. So the
faithful picture is a forest: each cached block points to its parent, and every root-to-leaf path
is a cached prompt prefix. Cache hits are invisible in events (nothing changes); the server's
``/metrics`` counts them (see :mod:`teaching.live.metrics`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from engine.kv_events import decode_batch
from teaching.live.frames import Frame

BlockKey = int | bytes  # vLLM's ExternalBlockHash: a 64-bit int on the wire (bytes in old versions)
#: Evicted blocks kept for drawing (as ghosts); older ones are only counted.
GHOSTS_KEPT = 48
#: History points kept per replica (one per applied batch).
HISTORY_KEPT = 5000
#: Recent ``BlockStored`` events kept per replica (the page's "where did each request go").
STORES_KEPT = 64


@dataclass
class CachedBlock:
    """One cached block as the events describe it."""

    block_hash: BlockKey
    parent: BlockKey | None
    token_ids: tuple[int, ...]
    stored_seq: int
    stored_ts: float
    copies: int = 1  # the same hash stored twice (two requests computed it at once) needs two removals
    block_id: int | None = None  # physical id, only when the publisher adds it (PrefixLab's server may)
    lora_name: str | None = None
    removed_seq: int | None = None


@dataclass(frozen=True)
class HistoryPoint:
    """The cache after one batch: how many blocks it stored, removed, and now holds."""

    seq: int
    ts: float
    stored: int
    removed: int
    cached: int
    cleared: bool = False


@dataclass(frozen=True)
class StoreNote:
    """One ``BlockStored`` event: a request (or one step of it) stored ``blocks`` blocks after ``parent``."""

    seq: int
    ts: float
    first: BlockKey
    parent: BlockKey | None
    blocks: int


@dataclass
class ReplicaState:
    """One replica's cached blocks and the history of how they came and went."""

    name: str
    blocks: dict[BlockKey, CachedBlock] = field(default_factory=dict)
    ghosts: deque[CachedBlock] = field(default_factory=lambda: deque(maxlen=GHOSTS_KEPT))
    history: deque[HistoryPoint] = field(default_factory=lambda: deque(maxlen=HISTORY_KEPT))
    stores: deque[StoreNote] = field(default_factory=lambda: deque(maxlen=STORES_KEPT))
    block_size: int | None = None
    last_seq: int | None = None
    batches: int = 0
    total_stored: int = 0
    total_removed: int = 0
    clears: int = 0
    #: Hashes held by the server's second tier (KV events with ``medium`` "CPU", vLLM's offloading).
    host_blocks: set[int] = field(default_factory=set)
    unknown_removals: int = 0  # removals of hashes we never saw stored (history started late)

    # -- applying events ----------------------------------------------------------------------------
    def apply(self, seq: int, ts: float, events: Iterable[Any]) -> HistoryPoint:
        """Apply one batch's events (decoded ``BlockStored`` / ``BlockRemoved`` / ``AllBlocksCleared``)."""
        stored = removed = 0
        cleared = False
        for event in events:
            kind = type(event).__name__
            if getattr(event, "medium", None) == "CPU":  # the offload tier: its own set, not the device pool
                if kind == "BlockStored":
                    self.host_blocks.update(event.block_hashes)
                elif kind == "BlockRemoved":
                    self.host_blocks.difference_update(event.block_hashes)
                continue
            if kind == "BlockStored":
                stored += self._store(seq, ts, event)
            elif kind == "BlockRemoved":
                removed += self._remove(seq, event.block_hashes)
            elif kind == "AllBlocksCleared":
                cleared = True
                self.clears += 1
                self.host_blocks.clear()
                for block in self.blocks.values():
                    block.removed_seq = seq
                    self.ghosts.append(block)
                self.blocks.clear()
        self.last_seq = seq
        self.batches += 1
        point = HistoryPoint(seq, ts, stored, removed, len(self.blocks), cleared)
        self.history.append(point)
        return point

    def _store(self, seq: int, ts: float, event: Any) -> int:
        size = int(event.block_size)
        self.block_size = size
        parent: BlockKey | None = event.parent_block_hash
        tokens = list(event.token_ids)
        block_ids = list(getattr(event, "block_ids", None) or [])
        for index, key in enumerate(event.block_hashes):
            existing = self.blocks.get(key)
            if existing is not None:
                existing.copies += 1
            else:
                self.blocks[key] = CachedBlock(
                    key, parent, tuple(tokens[index * size:(index + 1) * size]), seq, ts,
                    block_id=block_ids[index] if index < len(block_ids) else None,
                    lora_name=getattr(event, "lora_name", None))
            parent = key
        self.total_stored += len(event.block_hashes)
        if event.block_hashes:
            self.stores.append(StoreNote(seq, ts, event.block_hashes[0], event.parent_block_hash,
                                         len(event.block_hashes)))
        return len(event.block_hashes)

    def _remove(self, seq: int, keys: Sequence[BlockKey]) -> int:
        for key in keys:
            block = self.blocks.get(key)
            if block is None:
                self.unknown_removals += 1
                continue
            block.copies -= 1
            if block.copies <= 0:
                del self.blocks[key]
                block.removed_seq = seq
                self.ghosts.append(block)
        self.total_removed += len(keys)
        return len(keys)

    # -- reading the picture ------------------------------------------------------------------------
    def children(self) -> dict[BlockKey | None, list[BlockKey]]:
        """Cached blocks under each parent; a block whose parent is not cached hangs under ``None``."""
        tree: dict[BlockKey | None, list[BlockKey]] = {}
        for key, block in self.blocks.items():
            parent = block.parent if block.parent in self.blocks else None
            tree.setdefault(parent, []).append(key)
        return tree

    def prefix_of(self, key: BlockKey) -> list[CachedBlock]:
        """The cached chain from a root down to ``key`` (stops where a parent is no longer cached)."""
        chain: list[CachedBlock] = []
        current: BlockKey | None = key
        while current is not None and current in self.blocks and len(chain) <= len(self.blocks):
            chain.append(self.blocks[current])
            current = self.blocks[current].parent
        return chain[::-1]

    def leaves(self) -> list[BlockKey]:
        parents = {block.parent for block in self.blocks.values()}
        return [key for key in self.blocks if key not in parents]

    def cached_tokens(self) -> int:
        return sum(len(block.token_ids) for block in self.blocks.values())


class LiveState:
    """Every replica's picture, fed with frames (decoded here) and reset on the subscriber's word."""

    def __init__(self) -> None:
        self.replicas: dict[str, ReplicaState] = {}
        self.undecodable = 0

    def replica(self, name: str) -> ReplicaState:
        if name not in self.replicas:
            self.replicas[name] = ReplicaState(name)
        return self.replicas[name]

    def reset(self, name: str) -> None:
        self.replicas[name] = ReplicaState(name)

    def apply_frame(self, frame: Frame) -> HistoryPoint | None:
        try:
            batch = decode_batch(frame.payload)
        except (msgspec.DecodeError, TypeError, ValueError):  # not a KVEventBatch: count it, keep going
            self.undecodable += 1
            return None
        return self.replica(frame.server).apply(frame.seq, float(batch.ts), batch.events)


def state_from_frames(frames: Iterable[Frame], upto: int | None = None) -> LiveState:
    """The picture after the first ``upto`` frames (all when None): replaying a recording."""
    state = LiveState()
    for index, frame in enumerate(frames):
        if upto is not None and index >= upto:
            break
        state.apply_frame(frame)
    return state
