"""The tier's small shared types, with vLLM's names (``vllm/v1/kv_offload/base.py``).

A key is a block hash (one KV cache group, so vLLM's 4-byte group suffix is left off). A host
chunk holds one device block (vLLM's default ``blocks_per_chunk=1``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, auto
from typing import Any

OffloadKey = bytes
#: The ``medium`` vLLM's KV events carry for blocks in the CPU tier.
MEDIUM_CPU = "CPU"


class LookupResult(Enum):
    """What a lookup finds: a ready chunk, a chunk still being written, or nothing."""

    MISS = auto()
    HIT = auto()
    HIT_PENDING = auto()


@dataclass
class ChunkStatus:
    """One host chunk: ``ref_cnt`` is -1 while its store is in flight, else the loads reading it."""

    chunk_id: int
    ref_cnt: int = -1

    @property
    def is_ready(self) -> bool:
        return self.ref_cnt >= 0


@dataclass
class ReqContext:
    """Per request: each key's end-token position (prefix order) and scratch state of the tier."""

    req_id: str
    positions: dict[OffloadKey, int] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)

    def set_offload_key_position(self, key: OffloadKey, end_token: int) -> None:
        self.positions[key] = end_token

    def get_offload_key_position(self, key: OffloadKey) -> int | None:
        return self.positions.get(key)


@dataclass
class PrepareStoreOutput:
    """Which offered keys need writing, into which chunks, and what was evicted to make room."""

    keys_to_store: list[OffloadKey]
    chunk_ids: list[int]
    evicted_keys: list[OffloadKey]


@dataclass
class OffloadingEvent:
    """Keys that entered (``removed=False``) or left the tier; becomes a KV event with ``medium``."""

    keys: list[OffloadKey]
    medium: str
    removed: bool


def order_request_keys(keys: list[OffloadKey], req_context: ReqContext) -> list[OffloadKey]:
    """A request's keys head to tail, by position when every key has one (else as observed)."""
    if all(req_context.get_offload_key_position(k) is not None for k in keys):
        return sorted(keys, key=lambda k: req_context.positions[k])
    return list(keys)


@dataclass
class TransferPlan:
    """One step's copies: loads run before the forward pass, stores after it."""

    loads: list[tuple[int, int]] = field(default_factory=list)   # (host chunk, device block)
    stores: list[tuple[int, int]] = field(default_factory=list)  # (device block, host chunk)
    load_jobs: list[tuple[ReqContext, list[OffloadKey]]] = field(default_factory=list)
    store_jobs: list[tuple[ReqContext, list[OffloadKey]]] = field(default_factory=list)

    @property
    def is_empty(self) -> bool:
        return not (self.loads or self.stores)
