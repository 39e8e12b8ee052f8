"""Trace lines as requests the real :class:`~engine.kv_cache.KVCacheManager` accepts.

A trace names each 512-token block by an id and withholds the tokens. The manager needs
only two things from a request to look it up, allocate and cache it: its length in tokens
and its chain of block hashes. So a block's id stands in for its tokens: block ``i`` gets
the engine's own chained hash ``hash_block(hash of block i-1, (id,))``, which makes equal
hashes mean equal *prefixes*, whatever the ids of the file repeat.

Only full blocks get a hash (a partial last block is never cached, as in vLLM), and the
manager's rule that the last token is always recomputed applies to ``input_length``.
"""

from __future__ import annotations

from engine.hashing import BlockHash, BlockHasher
from engine.request import Request, SamplingParams
from teaching.traces.loader import TRACE_BLOCK_SIZE, Trace, TraceRecord

_PARAMS = SamplingParams(max_tokens=1)  # never sampled: a replay has no model


class TraceRequest(Request):
    """A request known by its length and block hashes only (its text is withheld).

    It carries no token ids (a one-token placeholder satisfies ``Request``), reports
    ``input_length`` as its length, and ignores the manager's hasher: its hashes are given.
    """

    def __init__(self, request_id: str, record: TraceRecord, block_hashes: list[BlockHash]) -> None:
        super().__init__(request_id, [0], _PARAMS, arrival_time=record.timestamp / 1000.0)
        self.record = record
        self._num_trace_tokens = record.input_length
        self.block_hashes = block_hashes

    @property
    def num_tokens(self) -> int:
        return self._num_trace_tokens

    @property
    def num_prompt_tokens(self) -> int:
        return self._num_trace_tokens

    def attach_hasher(self, hasher: BlockHasher, block_size: int) -> None:
        """Nothing to compute: the hashes came with the trace."""


def chain_hashes(trace: Trace, hasher: BlockHasher | None = None) -> list[list[BlockHash]]:
    """The chained hash of every *full* block of every request, in trace order.

    A prefix shared by many requests is hashed once (memoised on ``(parent, id)``), so the
    whole conversation trace costs one hash per distinct prefix block.
    """
    hasher = hasher or BlockHasher("sha256")
    memo: dict[tuple[BlockHash | None, int], BlockHash] = {}
    chains: list[list[BlockHash]] = []
    for record in trace.records:
        chain: list[BlockHash] = []
        parent: BlockHash | None = None
        for block_id in record.hash_ids[: record.input_length // TRACE_BLOCK_SIZE]:
            key = (parent, block_id)
            block_hash = memo.get(key)
            if block_hash is None:
                block_hash = memo[key] = hasher.hash_block(parent, (block_id,))
            chain.append(block_hash)
            parent = block_hash
        chains.append(chain)
    return chains
