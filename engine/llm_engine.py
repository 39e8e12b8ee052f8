"""``LLMEngine``: requests in, tokens out; ties the scheduler, the cache and a back end.

One :meth:`step` = schedule a batch -> run it on the back end (a real model, or the
simulator) -> append the sampled tokens -> finish and free what is done. Every change
to the cache along the way lands in the event log, which :meth:`timeline` replays.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from typing import Any

from engine.backend import Backend
from engine.config import EngineConfig
from engine.errors import InvalidRequestError, UnknownRequestError
from engine.kv_cache import KVCacheManager
from engine.kv_cache.factory import build_kv_cache_manager
from engine.kv_offload import CPUOffloadingManager, OffloadingConnector
from engine.outputs import RequestMetrics, RequestOutput
from engine.request import Request, RequestStatus, SamplingParams, validate_token_ids
from engine.scheduler import Scheduler, SchedulerOutput
from engine.simulator import SimulatorBackend
from engine.timeline import Timeline

Prompt = str | list[int] | list[dict[str, str]]

SIMULATOR_DEFAULT_NUM_BLOCKS = 64


def build_backend(config: EngineConfig, progress: Any = None) -> Backend:
    """The object that turns a scheduled batch into sampled tokens."""
    if config.backend == "simulator":
        return SimulatorBackend(seed=config.seed)
    from engine.model import ModelBackend  # imports torch: only when a model is wanted

    return ModelBackend(config, progress=progress)


def build_offloading(config: EngineConfig, backend: Backend, kv: KVCacheManager) -> OffloadingConnector | None:
    """The offload tier (vLLM's native KV offloading) when the config asks for one; its host pages
    are allocated by the back end (a model copies real K/V; the simulator keeps only the bookkeeping)."""
    settings = config.kv_offloading
    if settings is None:
        return None
    bytes_per_token = getattr(backend, "kv_bytes_per_token", None)
    num_chunks = settings.num_chunks(bytes_per_token * kv.block_size if bytes_per_token else None)
    allocate = getattr(backend, "allocate_host_kv_cache", None)
    if allocate is not None:
        allocate(num_chunks)
    manager = CPUOffloadingManager(num_chunks, settings.eviction_policy, enable_events=True)
    return OffloadingConnector(manager, kv.block_size, kv.events)


class LLMEngine:
    def __init__(self, config: EngineConfig | None = None, *, backend: Backend | None = None,
                 progress: Any = None) -> None:
        self.config = config or EngineConfig()
        self.backend: Backend = backend if backend is not None else build_backend(self.config, progress)
        num_blocks = self.config.num_blocks or self.backend.preferred_num_blocks() or SIMULATOR_DEFAULT_NUM_BLOCKS
        self.kv_cache_manager = build_kv_cache_manager(self.config, num_blocks)
        self.backend.allocate_kv_cache(num_blocks, self.config.block_size)
        self.scheduler = Scheduler(self.kv_cache_manager, self.config.max_num_batched_tokens, self.config.max_num_seqs)
        self.offloading: OffloadingConnector | None = build_offloading(self.config, self.backend, self.kv_cache_manager)
        self.scheduler.connector = self.offloading
        self.tokenizer = self.backend.tokenizer
        self.metrics: dict[str, RequestMetrics] = {}
        self._texts: dict[str, str] = {}
        self._ids = itertools.count()
        self._timeline: Timeline | None = None

    # -- requests ---------------------------------------------------------------------------------
    def tokenize(self, prompt: Prompt) -> list[int]:
        """Token ids of a prompt: ids pass through, text is encoded, chat messages get the template."""
        if isinstance(prompt, str):
            if not prompt.strip():
                raise InvalidRequestError("The prompt is empty: type some text.")
            if self.tokenizer is None:
                raise InvalidRequestError("This model has no tokenizer: pass token ids instead of text.")
            return self.tokenizer.encode(prompt)
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], dict):
            return self.backend.apply_chat_template(prompt)
        return validate_token_ids(prompt)

    def add_request(
        self,
        prompt: Prompt,
        sampling_params: SamplingParams | None = None,
        request_id: str | None = None,
        *,
        lora_name: str | None = None,
        lora_path: str | None = None,
        lora_id: int | None = None,
        cache_salt: str | None = None,
        prompt_logprobs: int | None = None,
        scripted_output: list[int] | None = None,
    ) -> str:
        """Queue a request; returns its id. Rejects, with a clear message, what can never run."""
        params = sampling_params or SamplingParams()
        token_ids = self.tokenize(prompt)
        request_id = request_id if request_id is not None else f"req-{next(self._ids)}"
        if request_id in self.scheduler.requests:
            raise InvalidRequestError(f"Request id {request_id!r} is already in use.")
        self._check_fits(token_ids, params)
        request = Request(
            request_id, token_ids, params,
            lora_name=lora_name, lora_path=lora_path, lora_id=lora_id, cache_salt=cache_salt, prompt_logprobs=prompt_logprobs,
        )
        if scripted_output is not None:
            self.backend.set_script(request_id, scripted_output)
        self.metrics[request_id] = RequestMetrics(arrival_time=time.perf_counter(), num_prompt_tokens=len(token_ids))
        self._texts[request_id] = ""
        self.scheduler.add_request(request)
        return request_id

    def _check_fits(self, token_ids: list[int], params: SamplingParams) -> None:
        vocab_size = self.backend.vocab_size
        if vocab_size is not None and max(token_ids) >= vocab_size:
            raise InvalidRequestError(f"Token id {max(token_ids)} is outside the model's vocabulary (size {vocab_size}).")
        # The last sampled token never needs a slot, hence the -1.
        needed = len(token_ids) + params.max_tokens - 1
        max_model_len = self.backend.max_model_len
        if max_model_len is not None and needed > max_model_len:
            raise InvalidRequestError(
                f"The prompt ({len(token_ids)} tokens) plus max_tokens ({params.max_tokens}) exceeds the "
                f"model's context of {max_model_len} tokens."
            )
        capacity = self.kv_cache_manager.max_tokens_in_pool
        if needed > capacity:
            raise InvalidRequestError(
                f"The prompt ({len(token_ids)} tokens) plus max_tokens ({params.max_tokens}) needs {needed} KV slots, "
                f"but the whole pool holds {capacity} ({self.kv_cache_manager.num_blocks - 1} blocks x "
                f"{self.kv_cache_manager.block_size}). Use a shorter prompt or more blocks."
            )

    def abort_request(self, request_id: str) -> None:
        self.scheduler.finish_request(request_id, RequestStatus.FINISHED_ABORTED)
        self._finish_metrics(request_id)

    def forget_request(self, request_id: str) -> None:
        """Drop a finished request's bookkeeping (a long-running server would otherwise grow forever)."""
        if not self.get_request(request_id).is_finished:
            raise InvalidRequestError(f"Request {request_id!r} is still running: abort it first.")
        del self.scheduler.requests[request_id]
        self.metrics.pop(request_id, None)
        self._texts.pop(request_id, None)

    def has_unfinished_requests(self) -> bool:
        return self.scheduler.has_unfinished_requests()

    def get_request(self, request_id: str) -> Request:
        if request_id not in self.scheduler.requests:
            raise UnknownRequestError(f"Unknown request {request_id!r}.")
        return self.scheduler.requests[request_id]

    # -- stepping -----------------------------------------------------------------------------------
    def step(self) -> list[RequestOutput]:
        """Run one batch; returns an output for every request that got a token this step."""
        sched_out = self.scheduler.schedule()
        if sched_out.is_empty:
            if self.scheduler.waiting and not self.scheduler.running:
                raise RuntimeError("The scheduler could not admit any waiting request into an empty pool.")
            return []
        now = time.perf_counter()
        prefilling = []
        for item in sched_out.scheduled:
            metrics = self.metrics[item.request_id]
            if metrics.first_scheduled_time is None:
                metrics.first_scheduled_time = now
                metrics.num_cached_tokens = max(0, item.request.num_cached_tokens)
            prompt_end = item.request.num_prompt_tokens
            new_prompt_tokens = max(0, min(prompt_end, item.num_computed_tokens + item.num_new_tokens) - item.num_computed_tokens)
            metrics.num_computed_prefill_tokens += new_prompt_tokens
            if new_prompt_tokens or item.num_computed_tokens < prompt_end:
                prefilling.append(metrics)
        started = time.perf_counter()
        sampled = self.backend.execute(sched_out)
        forward = time.perf_counter() - started
        if self.offloading is not None and sched_out.kv_transfers is not None:
            self.offloading.update_connector_output(sched_out.kv_transfers)
        for metrics in prefilling:
            metrics.prefill_time += forward
        finished = self.scheduler.update_from_output(sched_out, sampled, self.backend.eos_token_ids)
        return self._collect_outputs(sched_out, sampled, finished)

    def _collect_outputs(self, sched_out: SchedulerOutput, sampled: dict[str, int], finished: list[Request]) -> list[RequestOutput]:
        now = time.perf_counter()
        outputs = []
        for item in sched_out.scheduled:
            request = item.request
            if request.request_id not in sampled:
                continue
            metrics = self.metrics[request.request_id]
            if metrics.first_token_time is None:
                metrics.first_token_time = now
            metrics.num_output_tokens = request.num_output_tokens
            metrics.num_preemptions = request.num_preemptions
            self._update_text(request)
            if request.is_finished:
                self._finish_metrics(request.request_id)
            outputs.append(self.output_of(request.request_id))
        return outputs

    def _update_text(self, request: Request) -> None:
        if self.tokenizer is None:
            return
        # A trailing U+FFFD is a character whose bytes are still arriving (byte-level tokens): held back,
        # also at the end of the output, as vLLM's incremental detokenizer does.
        text = self.tokenizer.decode(request.output_token_ids).rstrip("\ufffd")
        for stop in request.sampling_params.stop:
            cut = text.find(stop)
            if stop and cut >= 0:
                text = text[:cut]
                if not request.is_finished:
                    self.scheduler.finish_request(request.request_id, RequestStatus.FINISHED_STOPPED)
        self._texts[request.request_id] = text

    def _finish_metrics(self, request_id: str) -> None:
        self.metrics[request_id].finished_time = time.perf_counter()
        self.backend.forget(request_id)

    def output_of(self, request_id: str) -> RequestOutput:
        request = self.get_request(request_id)
        return RequestOutput(
            request_id=request_id,
            prompt_token_ids=list(request.prompt_token_ids),
            token_ids=list(request.output_token_ids),
            text=self._texts.get(request_id, ""),
            finished=request.is_finished,
            finish_reason=request.status.value if request.is_finished else None,
            num_cached_tokens=max(0, request.num_cached_tokens),
            metrics=self.metrics[request_id],
        )

    def generate(
        self,
        prompts: Sequence[Prompt],
        sampling_params: SamplingParams | Sequence[SamplingParams] | None = None,
    ) -> list[RequestOutput]:
        """Run ``prompts`` to completion, batched together; outputs in prompt order.

        Every prompt is checked before any is queued, so one bad prompt leaves the engine as it was.
        """
        if isinstance(prompts, str):
            prompts = [prompts]
        params_list = list(sampling_params) if isinstance(sampling_params, Sequence) else [sampling_params or SamplingParams()] * len(prompts)
        token_lists = [self.tokenize(prompt) for prompt in prompts]
        for token_ids, params in zip(token_lists, params_list):
            self._check_fits(token_ids, params)
        ids = [self.add_request(token_ids, sp) for token_ids, sp in zip(token_lists, params_list)]
        while any(not self.get_request(i).is_finished for i in ids):
            self.step()
        return [self.output_of(i) for i in ids]

    # -- cache views --------------------------------------------------------------------------------
    def timeline(self) -> Timeline:
        """A replayable view of every cache event so far (grows as the engine runs)."""
        if self._timeline is None:
            self._timeline = Timeline(self.kv_cache_manager.num_blocks, self.kv_cache_manager.events.events)
        return self._timeline

    def reset_prefix_cache(self) -> bool:
        ok = self.kv_cache_manager.reset_prefix_cache()
        if ok and self.offloading is not None:
            self.offloading.reset()
        return ok
