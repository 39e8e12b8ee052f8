"""FCFS continuous batching with chunked prefill and preemption by recomputation.

Each :meth:`Scheduler.schedule` call builds one batch under a token budget:

1. **Running requests first**, in arrival order, each asking for the tokens it still
   lacks (a decode asks for 1, an unfinished prefill for the rest of its prompt, cut to
   the budget: that is chunked prefill). When the pool cannot fit one, the *last* running
   request is preempted: its blocks are freed (tail first, so they stay cached until
   evicted), its progress is reset to 0, and it goes to the *front* of the waiting queue.
2. **Then waiting requests**, unless this step preempted someone (admitting newcomers
   while evicting old ones would thrash). Each looks itself up in the prefix cache and
   only its uncached tokens are scheduled.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from engine.errors import ConfigError, UnknownRequestError
from engine.events import (
    RequestArrived,
    RequestFinished,
    RequestPreempted,
    RequestScheduled,
    StepStarted,
    TokenGenerated,
)
from engine.kv_cache import KVCacheManager
from engine.request import Request, RequestStatus
from engine.scheduler_output import ScheduledRequest, SchedulerOutput

if TYPE_CHECKING:
    from engine.kv_offload import OffloadingConnector


class Scheduler:
    def __init__(
        self,
        kv_cache_manager: KVCacheManager,
        max_num_batched_tokens: int = 2048,
        max_num_seqs: int = 64,
    ) -> None:
        if max_num_batched_tokens < 1 or max_num_seqs < 1:
            raise ConfigError("max_num_batched_tokens and max_num_seqs must be at least 1.")
        self.kv_cache_manager = kv_cache_manager
        self.events = kv_cache_manager.events
        self.max_num_batched_tokens = max_num_batched_tokens
        self.max_num_seqs = max_num_seqs
        self.requests: dict[str, Request] = {}
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.step_count = 0
        #: The KV offloading tier's scheduler side (vLLM's OffloadingConnector); None: tier off.
        self.connector: OffloadingConnector | None = None

    # -- queue management ---------------------------------------------------------------------
    def add_request(self, request: Request) -> None:
        if request.request_id in self.requests:
            raise ValueError(f"Request id {request.request_id!r} is already in use.")
        self.requests[request.request_id] = request
        self.waiting.append(request)
        if self.connector is not None:
            self.connector.on_new_request(request)
        self.events.emit(RequestArrived(request.request_id, request.num_prompt_tokens, list(request.prompt_token_ids)))

    def has_unfinished_requests(self) -> bool:
        return bool(self.waiting or self.running)

    def _preempt(self, request: Request) -> None:
        self.kv_cache_manager.free(request)
        request.status = RequestStatus.PREEMPTED
        request.num_computed_tokens = 0
        request.num_preemptions += 1
        self.waiting.appendleft(request)
        self.events.emit(RequestPreempted(request.request_id))

    # -- one step -----------------------------------------------------------------------------------
    def schedule(self) -> SchedulerOutput:
        self.step_count += 1
        self.events.emit(StepStarted(self.step_count))
        out = SchedulerOutput(step=self.step_count)
        budget = self.max_num_batched_tokens
        kv = self.kv_cache_manager

        index = 0
        while index < len(self.running) and budget > 0:
            request = self.running[index]
            num_new = min(request.num_tokens - request.num_computed_tokens, budget)
            if num_new <= 0:
                index += 1
                continue
            while kv.allocate_slots(request, num_new) is None:
                victim = self.running.pop()
                self._preempt(victim)
                out.preempted.append(victim.request_id)
                if victim is request:
                    break
            if request.status == RequestStatus.PREEMPTED:
                break
            out.scheduled.append(ScheduledRequest(request, num_new, request.num_computed_tokens, kv.get_block_ids(request.request_id)))
            budget -= num_new
            index += 1

        while not out.preempted and self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            request = self.waiting[0]
            hit_blocks, num_hit_tokens = kv.get_computed_blocks(request)
            num_external = 0
            if self.connector is not None:
                found = self.connector.get_num_new_matched_tokens(request, num_hit_tokens)
                if found is None:  # a block it needs is still being written to the tier
                    break
                num_external = found
            num_computed = num_hit_tokens + num_external
            num_new = min(request.num_tokens - num_computed, budget)
            # Loaded blocks need device blocks too: they are allocated like new ones.
            if kv.allocate_slots(request, num_external + num_new, num_hit_tokens, hit_blocks,
                                 has_scheduled_reqs=bool(self.running)) is None:
                break
            self.waiting.popleft()
            self.running.append(request)
            request.status = RequestStatus.RUNNING
            request.num_computed_tokens = num_computed
            if request.num_cached_tokens < 0:
                request.num_cached_tokens = num_computed
            block_ids = kv.get_block_ids(request.request_id)
            if self.connector is not None:
                self.connector.record_admission(request, num_hit_tokens, num_external)
                self.connector.update_state_after_alloc(request, block_ids, num_external)
            out.scheduled.append(ScheduledRequest(request, num_new, num_computed, block_ids))
            budget -= num_new

        if self.connector is not None:
            out.kv_transfers = self.connector.build_connector_meta(out.scheduled)
        for item in out.scheduled:
            self.events.emit(RequestScheduled(item.request_id, item.num_new_tokens, item.num_computed_tokens))
            item.request.num_computed_tokens += item.num_new_tokens
        return out

    def update_from_output(self, output: SchedulerOutput, sampled: dict[str, int], eos_token_ids: set[int] | None = None) -> list[Request]:
        """Append each sampled token, finish requests that hit a stop condition. Returns the finished."""
        finished: list[Request] = []
        for item in output.scheduled:
            request = item.request
            if request.is_finished or request.request_id not in sampled:
                continue
            token = sampled[request.request_id]
            request.append_output_token_ids(token)
            self.events.emit(TokenGenerated(request.request_id, token))
            params = request.sampling_params
            if (not params.ignore_eos and eos_token_ids and token in eos_token_ids) or token in params.stop_token_ids:
                self.finish_request(request.request_id, RequestStatus.FINISHED_STOPPED)
            elif request.num_output_tokens >= params.max_tokens:
                self.finish_request(request.request_id, RequestStatus.FINISHED_LENGTH)
            if request.is_finished:
                finished.append(request)
        return finished

    def finish_request(self, request_id: str, status: RequestStatus = RequestStatus.FINISHED_ABORTED) -> Request:
        """Stop a request (stop condition met, or aborted) and free its blocks."""
        request = self.requests.get(request_id)
        if request is None:
            raise UnknownRequestError(f"Unknown request {request_id!r}.")
        if request.is_finished:
            return request
        if request in self.running:
            self.running.remove(request)
        elif request in self.waiting:
            self.waiting.remove(request)
        if request_id in self.kv_cache_manager.req_to_blocks:
            self.kv_cache_manager.free(request)
        request.status = status
        if self.connector is not None:
            self.connector.request_finished(request)
        self.events.emit(RequestFinished(request_id, status.value))
        return request
