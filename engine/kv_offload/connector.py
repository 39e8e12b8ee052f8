"""The scheduler side of vLLM's OffloadingConnector, for PrefixLab's scheduler.

What happens when, as in vLLM 0.33 (single full-attention group, one block per chunk, prompt-only):

* **Admission** (:meth:`get_num_new_matched_tokens`): after the device lookup found ``n`` cached
  tokens, the tier is asked about the blocks *after* them, in order, until the first miss. A
  block still being written (``HIT_PENDING``) makes the request wait a step. The hit is whole
  blocks and leaves the last prompt token to compute (PrefixLab loads synchronously; vLLM's
  sync-load path keeps that token too). Those tokens count as cached: *external* hits.
* **Allocation** (:meth:`update_state_after_alloc`): the hit blocks get fresh device blocks and a
  load job (host chunk -> device block), pinned until the step's copies are done.
* **Every step** (:meth:`build_connector_meta`): each scheduled request offers its prompt blocks
  that this step completes (write-through: stored as soon as computed, not when evicted) and,
  on the first step after a lookup without a load, the device hits too (already stored ones are
  a reuse; missing ones are stored again). Requests that finished since the last step report
  their accesses to the policy.
* **After the pass** (:meth:`update_connector_output`): loads and stores complete; the tier's
  events become KV events with ``medium="CPU"``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.events import BlockRemoved, BlockStored, EventLog
from engine.kv_offload.base import LookupResult, OffloadKey, ReqContext, TransferPlan
from engine.kv_offload.manager import CPUOffloadingManager

if TYPE_CHECKING:
    from engine.request import Request
    from engine.scheduler_output import ScheduledRequest

logger = logging.getLogger(__name__)


@dataclass
class _RequestState:
    context: ReqContext
    keys: list[OffloadKey] = field(default_factory=list)
    next_stored: int = 0
    num_local_computed: int = 0


@dataclass
class OffloadingStats:
    """vLLM's connector counters: ``external_prefix_cache_queries/hits`` (tokens) and prompt tokens by source."""

    external_queries: int = 0
    external_hits: int = 0
    tokens_by_source: dict[str, int] = field(
        default_factory=lambda: {"local_compute": 0, "local_cache_hit": 0, "external_kv_transfer": 0})
    loaded_blocks: int = 0
    stored_blocks: int = 0
    store_failures: int = 0


class OffloadingConnector:
    def __init__(self, manager: CPUOffloadingManager, block_size: int, events: EventLog) -> None:
        self.manager = manager
        self.block_size = block_size
        self.events = events
        self.stats = OffloadingStats()
        self._requests: dict[str, _RequestState] = {}
        self._plan = TransferPlan()
        self._finished: list[str] = []

    # -- requests -----------------------------------------------------------------------------------
    def on_new_request(self, request: Request) -> None:
        context = ReqContext(request.request_id)
        self.manager.on_new_request(context)
        self._requests[request.request_id] = _RequestState(context)

    def _update_keys(self, request: Request, state: _RequestState) -> None:
        for block_hash in request.block_hashes[len(state.keys):]:
            state.keys.append(block_hash)
            state.context.set_offload_key_position(block_hash, len(state.keys) * self.block_size)

    def get_num_new_matched_tokens(self, request: Request, num_computed_tokens: int) -> int | None:
        """Tokens after the device hit that the tier holds (whole blocks), or ``None``: wait a step."""
        state = self._requests[request.request_id]
        state.next_stored = 0  # restarting: offer every block again
        self._update_keys(request, state)
        state.num_local_computed = num_computed_tokens
        if request.skip_reading_prefix_cache:
            return 0
        bs = self.block_size
        max_chunks = min((request.num_tokens - 1) // bs, len(state.keys))
        start = num_computed_tokens // bs
        if max_chunks - start < 1:
            return 0
        hits, pending = 0, False
        for key in state.keys[start:max_chunks]:
            result = self.manager.lookup(key, state.context)
            if result is LookupResult.MISS:
                break
            hits += 1
            pending |= result is LookupResult.HIT_PENDING
        if pending:
            return None
        return hits * bs

    def record_admission(self, request: Request, num_local: int, num_external: int) -> None:
        """vLLM counts the connector's queries (tokens past the device hit) and hits at admission."""
        self.stats.external_queries += request.num_tokens - num_local
        self.stats.external_hits += num_external
        if request.num_preemptions == 0:
            by_source = self.stats.tokens_by_source
            by_source["local_cache_hit"] += num_local
            by_source["external_kv_transfer"] += num_external
            by_source["local_compute"] += request.num_prompt_tokens - num_local - num_external

    def update_state_after_alloc(self, request: Request, block_ids: list[int], num_external_tokens: int) -> None:
        """Plan the load of the hit blocks into the request's fresh device blocks."""
        if num_external_tokens == 0:
            return
        state = self._requests[request.request_id]
        bs = self.block_size
        start = state.num_local_computed // bs
        end = (state.num_local_computed + num_external_tokens) // bs
        keys = state.keys[start:end]
        chunk_ids = self.manager.prepare_load(keys, state.context)
        self._plan.loads += list(zip(chunk_ids, block_ids[start:end]))
        self._plan.load_jobs.append((state.context, keys))
        state.next_stored = end  # the loaded blocks are in the tier already
        self.stats.loaded_blocks += len(keys)

    def request_finished(self, request: Request) -> None:
        if request.request_id in self._requests:
            self._finished.append(request.request_id)

    # -- per step -----------------------------------------------------------------------------------
    def build_connector_meta(self, scheduled: list[ScheduledRequest]) -> TransferPlan:
        """Offer each scheduled request's newly full prompt blocks; returns this step's copies."""
        bs = self.block_size
        for item in scheduled:
            state = self._requests.get(item.request_id)
            if state is None:
                continue
            request = item.request
            self._update_keys(request, state)
            offloadable = min(item.num_computed_tokens + item.num_new_tokens, request.num_prompt_tokens)
            num_chunks = min(offloadable // bs, len(item.block_ids), len(state.keys))
            keys = state.keys[state.next_stored:num_chunks]
            if not keys:
                state.next_stored = max(state.next_stored, num_chunks)
                continue
            output = self.manager.prepare_store(keys, state.context)
            if output is None:
                self.stats.store_failures += 1
                logger.warning("Request %s: the offloading tier cannot store %d blocks", item.request_id, len(keys))
                continue
            state.next_stored = max(state.next_stored, num_chunks)
            if not output.keys_to_store:
                continue
            index = {key: i for i, key in enumerate(state.keys)}
            self._plan.stores += [(item.block_ids[index[k]], c) for k, c in zip(output.keys_to_store, output.chunk_ids)]
            self._plan.store_jobs.append((state.context, output.keys_to_store))
            self.stats.stored_blocks += len(output.keys_to_store)
        for request_id in self._finished:
            state = self._requests.pop(request_id, None)
            if state is not None:
                self.manager.on_request_finished(state.context)
        self._finished = []
        plan, self._plan = self._plan, TransferPlan()
        return plan

    def update_connector_output(self, plan: TransferPlan) -> None:
        """The step's copies are done: unpin loads, make stores loadable, publish the tier's events."""
        for context, keys in plan.load_jobs:
            self.manager.complete_load(keys, context)
        for context, keys in plan.store_jobs:
            self.manager.complete_store(keys, context)
        for event in self.manager.take_events():
            if event.removed:
                self.events.emit(BlockRemoved(list(event.keys), medium=event.medium))
            else:
                for key in event.keys:  # vLLM announces each stored chunk on its own, hash only
                    self.events.emit(BlockStored([key], None, [], 0, None, medium=event.medium))

    def reset(self) -> None:
        self.manager.reset_cache()
