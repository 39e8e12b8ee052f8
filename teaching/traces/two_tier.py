"""Replay a trace through two tiers: the device pool (a real ``KVCacheManager``) and a host tier
(the engine's own :class:`~engine.kv_offload.CPUOffloadingManager`), with vLLM's connector rules.

One request at a time (the ``sequential`` mode of :mod:`teaching.traces.replay`): look it up in
the device pool; look the blocks after the device hit up in the host tier, up to the first miss
(never the block of the last input token); load those (they count as cached); allocate the rest;
offer the prompt's full blocks to the tier (write-through: every computed block is stored, the
ones already there are a reuse); free. The hit rate counts tokens found in either tier.

The surface is that hit rate over a grid of device capacities x host capacities: how much a
cheap, large host tier buys a small device pool.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.kv_offload import CPUOffloadingManager, LookupResult, ReqContext
from teaching.traces.loader import TRACE_BLOCK_SIZE
from teaching.traces.policies import make_manager
from teaching.traces.replay import PreparedTrace


@dataclass
class TwoTierCounts:
    requests: int = 0
    input_tokens: int = 0
    device_hit_tokens: int = 0
    host_hit_tokens: int = 0
    rejected: int = 0

    @property
    def token_hit_rate(self) -> float:
        return (self.device_hit_tokens + self.host_hit_tokens) / self.input_tokens if self.input_tokens else 0.0

    @property
    def host_share(self) -> float:
        """Of the cached tokens, the fraction the host tier supplied."""
        cached = self.device_hit_tokens + self.host_hit_tokens
        return self.host_hit_tokens / cached if cached else 0.0


def replay_two_tier(prepared: PreparedTrace, device_blocks: int, host_blocks: int,
                    host_policy: str = "lru") -> TwoTierCounts:
    """Sequential replay with ``device_blocks`` usable device blocks and ``host_blocks`` host chunks (0: no tier)."""
    manager = make_manager("vllm", device_blocks + 1)
    tier = CPUOffloadingManager(host_blocks, host_policy) if host_blocks else None
    counts = TwoTierCounts()
    bs = TRACE_BLOCK_SIZE
    for index, request in enumerate(prepared.requests):
        record = request.record
        counts.requests += 1
        counts.input_tokens += record.input_length
        if prepared.needed_blocks[index] > device_blocks:
            counts.rejected += 1
            continue
        hits, num_hit = manager.get_computed_blocks(request)
        chain = prepared.chains[index]
        context = ReqContext(request.request_id)
        external = 0
        if tier is not None:
            for i, key in enumerate(chain):
                context.set_offload_key_position(key, (i + 1) * bs)
            tier.on_new_request(context)
            found = []
            for key in prepared.eligible[index][num_hit // bs:]:
                if tier.lookup(key) is not LookupResult.HIT:
                    break
                found.append(key)
            if found:
                tier.prepare_load(found, context)
                tier.complete_load(found, context)
                external = len(found) * bs
        total = record.input_length + record.output_length
        if manager.allocate_slots(request, total - num_hit, num_hit, hits) is None:  # pragma: no cover
            raise RuntimeError("an empty pool refused a request that fits")
        if tier is not None:
            start = (num_hit + external) // bs if external else 0  # loaded blocks are in the tier already
            offered = chain[start:]
            if offered:
                stored = tier.prepare_store(offered, context)
                if stored is not None and stored.keys_to_store:
                    tier.complete_store(stored.keys_to_store, context)
            tier.on_request_finished(context)
        manager.free(request)
        counts.device_hit_tokens += num_hit
        counts.host_hit_tokens += external
    return counts


@dataclass
class Surface:
    device_blocks: list[int]
    host_blocks: list[int]
    results: list[list[TwoTierCounts]]  # [host index][device index]

    def hit_rates(self) -> list[list[float]]:
        return [[c.token_hit_rate for c in row] for row in self.results]


def hit_rate_surface(prepared: PreparedTrace, device_blocks: list[int], host_blocks: list[int],
                     host_policy: str = "lru") -> Surface:
    """The token hit rate at every (device, host) capacity pair; host 0 is the device pool alone."""
    return Surface(device_blocks, host_blocks,
                   [[replay_two_tier(prepared, d, h, host_policy) for d in device_blocks] for h in host_blocks])
