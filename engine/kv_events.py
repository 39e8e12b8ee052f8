"""vLLM's KV events on the wire: the msgpack structs a router or dashboard subscribes to.

vLLM publishes, once per engine step that changed the cache, one ``KVEventBatch``:
``[ts, [event, ...], data_parallel_rank]`` packed as a msgpack *array*, where each
event is a msgpack *map* tagged by ``"type"`` (``"BlockStored"``, ``"BlockRemoved"``,
``"AllBlocksCleared"``). Block hashes travel as 64-bit unsigned integers, not digests
(see :func:`engine.hashing.external_block_hash`).

The structs below have vLLM's class names, field names, field order and msgspec options
(as of vLLM 0.32, the version of the recordings the tests decode), so vLLM's own
``msgspec`` decoder reads what :func:`encode_batch` writes, and :func:`decode_batch` reads
what vLLM writes. This module is only a translator: it sends what PrefixLab's engine events
carry (:mod:`engine.events`), including each stored block's KV cache group and that group's spec
(``group_idx``, ``kv_cache_spec_kind``, ``kv_cache_spec_sliding_window``, as vLLM 0.33 publishes
them; one full-attention group 0 unless the engine has a hybrid layer pattern).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import msgspec

from engine import events as engine_events

#: What vLLM calls ``ExternalBlockHash``: an int (the default) or the raw digest bytes.
ExternalBlockHash = bytes | int


class EventBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    """One step's events: a positional array ``[ts, events, data_parallel_rank]``."""

    ts: float
    events: list[Any]
    data_parallel_rank: int | None = None


class KVCacheEvent(msgspec.Struct, omit_defaults=True, gc=False, tag=True):
    """Base of the KV events: a map whose ``"type"`` is the class name."""


class BlockStored(KVCacheEvent):
    """Blocks became full and entered the hash table (hashes in chain order)."""

    block_hashes: list[ExternalBlockHash]
    parent_block_hash: ExternalBlockHash | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None  # deprecated in vLLM in favour of lora_name, still published
    medium: str | None
    lora_name: str | None
    extra_keys: list[tuple[Any, ...] | None] | None = None  # one entry per block, untagged
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None
    locality: str | None = None
    ownership: str | None = None
    session_id: str | None = None
    lookahead_token_ids: list[list[int]] | None = None  # vLLM 0.33; PrefixLab never hashes lookahead tokens


class BlockRemoved(KVCacheEvent):
    """Cached blocks were evicted: their hashes left the table."""

    block_hashes: list[ExternalBlockHash]
    medium: str | None
    group_idx: int | None = None
    locality: str | None = None
    ownership: str | None = None


class AllBlocksCleared(KVCacheEvent):
    """The prefix cache was reset: forget every hash of this engine."""


WireEvent = BlockStored | BlockRemoved | AllBlocksCleared
WIRE_TYPES: dict[str, type[WireEvent]] = {t.__name__: t for t in (BlockStored, BlockRemoved, AllBlocksCleared)}


class KVEventBatch(EventBatch):
    events: list[WireEvent]


def to_wire(event: engine_events.Event) -> WireEvent | None:
    """vLLM's struct for one PrefixLab event; ``None`` for teaching-only events.

    The fields come from the event's own ``published()`` (one home for what vLLM publishes, the
    same form the differential tests compare byte for byte against vLLM's encoder).
    """
    wire_type = WIRE_TYPES.get(type(event).__name__)
    if wire_type is None or not isinstance(event, engine_events.KV_EVENT_TYPES):
        return None
    return wire_type(**event.published())


def make_batch(
    events: Iterable[engine_events.Event], *, ts: float | None = None, data_parallel_rank: int = 0
) -> KVEventBatch | None:
    """The batch for one step's events, or ``None`` when none of them is a KV event.

    vLLM publishes nothing for a step that did not touch the hash table, and so do we.
    """
    wire = [w for w in map(to_wire, events) if w is not None]
    if not wire:
        return None
    return KVEventBatch(ts=time.time() if ts is None else ts, events=wire, data_parallel_rank=data_parallel_rank)


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(KVEventBatch)


def encode(batch: KVEventBatch) -> bytes:
    """The msgpack payload (third ZMQ frame) of one batch."""
    return _encoder.encode(batch)


def encode_batch(
    events: Iterable[engine_events.Event], *, ts: float | None = None, data_parallel_rank: int = 0
) -> bytes | None:
    """PrefixLab engine events -> vLLM's msgpack payload (``None`` when nothing to send)."""
    batch = make_batch(events, ts=ts, data_parallel_rank=data_parallel_rank)
    return None if batch is None else encode(batch)


def decode_batch(payload: bytes) -> KVEventBatch:
    """vLLM's msgpack payload -> structs. Raises ``msgspec.DecodeError`` on anything else."""
    return _decoder.decode(payload)


# -- the ZMQ frame around a payload ------------------------------------------------------------
SEQ_BYTES = 8
#: The sequence number the replay socket sends (with empty topic and payload) after the last batch.
END_SEQ = -1


def encode_seq(seq: int) -> bytes:
    """A sequence number as the second frame: 8 bytes, big-endian, signed (so -1 ends a replay)."""
    return seq.to_bytes(SEQ_BYTES, "big", signed=True)


def decode_seq(frame: bytes) -> int:
    return int.from_bytes(frame, "big", signed=True)
