"""The one thread that owns the engine: continuous batching across every HTTP client.

HTTP handlers never touch the engine. They :meth:`EngineLoop.submit` a request
with a ``deliver`` callback and wait for :class:`Update` objects; this thread admits
requests (round-robin across clients, up to the engine's batch size), calls
``LLMEngine.step()`` as long as anyone has work, hands each step's tokens back, and publishes
the step's KV events. So a token computed for one student's request rides in the same
forward pass as everybody else's: that is what makes one shared engine faster than thirty
private ones. An idle engine waits a moment (:data:`GATHER_S`) for a wave of new requests as big as
the last step's batch, so that the wave's prefills share one pass too.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TypeVar

from engine import kv_events
from engine.errors import PrefixLabError
from engine.llm_engine import LLMEngine, Prompt
from engine.request import RequestStatus, SamplingParams
from engine.server.kv_publisher import KVEventPublisher
from engine.server.limits import FairQueue
from engine.server.metrics import Gauges, ServerMetrics
from engine.server.protocol import finish_reason
from engine.server.residency import KVCacheResidency

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: How long the idle loop sleeps between checks when no request is pending or running.
IDLE_WAIT_S = 0.05
#: How long an idle engine waits for a wave of new requests to arrive before its first step. A client
#: that keeps N requests in flight sends the next one as each ends; requests that ended in one step
#: come back a few ms apart. Stepping at the first arrival would run its prefill alone and make the rest
#: wait for it (measured: a ~90 ms pass for one, then ~250 ms for seven; together ~260 ms).
GATHER_S = 0.02


@dataclass(frozen=True)
class Update:
    """What a handler learns after a step: cumulative text, counts, and whether it is over."""

    text: str = ""
    num_output_tokens: int = 0
    num_prompt_tokens: int = 0
    num_cached_tokens: int = 0
    num_created_cache_tokens: int = 0  # prompt tokens this request computed and left in the prefix cache
    finished: bool = False
    finish_reason: str | None = None
    error: str | None = None  # the engine refused the request (becomes a 400)


@dataclass
class Submission:
    request_id: str
    client: str
    prompt: Prompt  # text, token ids or chat messages: tokenized on the engine thread
    params: SamplingParams
    deliver: Callable[[Update], None]  # called on the engine thread; must be thread-safe
    cache_salt: str | None = None
    arrival: float = field(default_factory=time.perf_counter)
    num_tokens_seen: int = 0
    prompt_token_ids: list[int] = field(default_factory=list)
    num_created_cache_tokens: int = 0


class EngineLoop:
    def __init__(
        self,
        engine: LLMEngine,
        metrics: ServerMetrics,
        publisher: KVEventPublisher | None = None,
        max_running: int | None = None,
        max_prompt_tokens: int | None = None,
        kv_cache_metrics_sample: float | None = None,
        gather_s: float = GATHER_S,
    ) -> None:
        self.engine = engine
        self.residency = None if kv_cache_metrics_sample is None else KVCacheResidency(kv_cache_metrics_sample)
        self.max_prompt_tokens = max_prompt_tokens
        self.metrics = metrics
        self.publisher = publisher
        self.max_running = max_running or engine.scheduler.max_num_seqs
        self.gather_s = gather_s
        self._last_batch = 0  # requests served by the last step (the size of the wave that may come back)
        self._pending: FairQueue[Submission] = FairQueue()
        self._active: dict[str, Submission] = {}
        self._inbox: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="engine-loop", daemon=True)

    # -- called from other threads -------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout_s)

    def submit(self, submission: Submission) -> None:
        self._call(lambda: self._accept(submission))

    def abort(self, request_id: str) -> None:
        """Stop a request and free its blocks (a client went away or ran out of time)."""
        self._call(lambda: self._abort(request_id))

    def reset_prefix_cache(self) -> Future[bool]:
        """``False`` while any request holds blocks (vLLM refuses then too)."""
        done: Future[bool] = Future()
        self._call(lambda: done.set_result(self.engine.reset_prefix_cache()))
        return done

    def run(self, work: Callable[[], T]) -> Future[T]:
        """Run ``work`` on the engine thread (e.g. tokenizing for ``/tokenize``) and hand back its result."""
        done: Future[T] = Future()

        def command() -> None:
            try:
                done.set_result(work())
            except BaseException as exc:  # the caller decides what a failure means
                done.set_exception(exc)

        self._call(command)
        return done

    def gauges(self) -> Gauges:
        scheduler = self.engine.scheduler
        return Gauges(
            running=len(scheduler.running),
            waiting=len(scheduler.waiting) + len(self._pending),
            kv_cache_usage=self.engine.kv_cache_manager.usage,
        )

    def _call(self, command: Callable[[], None]) -> None:
        self._inbox.put(command)
        self._wake.set()

    # -- the engine thread ----------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stopping:
            self._wake.clear()
            self._run_commands()
            self._admit()
            if self.engine.has_unfinished_requests():
                self._gather()
                self._step()
            self._publish_events()
            if not self.engine.has_unfinished_requests():
                self._wake.wait(IDLE_WAIT_S)

    def _run_commands(self) -> None:
        while True:
            try:
                command = self._inbox.get_nowait()
            except queue.Empty:
                return
            try:
                command()
            except Exception:  # never let one command end the loop
                logger.exception("Engine loop command failed")

    def _gather(self) -> None:
        """On an idle engine (nothing running), wait up to ``gather_s`` until as many requests wait as
        the last step served, so that a wave of replacements shares one prefill pass."""
        scheduler = self.engine.scheduler
        deadline = time.monotonic() + self.gather_s
        while (not scheduler.running and len(scheduler.waiting) < self._last_batch and not self._stopping
               and (left := deadline - time.monotonic()) > 0):
            self._wake.clear()
            self._wake.wait(left)
            self._run_commands()
            self._admit()

    def _accept(self, sub: Submission) -> None:
        """Tokenize (here: the tokenizer is not shared between threads) and check the prompt cap."""
        try:
            sub.prompt_token_ids = self.engine.tokenize(sub.prompt)
        except PrefixLabError as exc:
            self._send(sub, Update(error=str(exc), finished=True))
            return
        except Exception as exc:  # e.g. the chat template refusing a conversation
            self._send(sub, Update(error=f"Cannot tokenize this prompt: {exc}", finished=True))
            return
        num = len(sub.prompt_token_ids)
        if self.max_prompt_tokens is not None and num > self.max_prompt_tokens:
            self._send(sub, Update(error=f"The prompt has {num} tokens; this server accepts at most "
                                         f"{self.max_prompt_tokens} per request.", finished=True))
            return
        self._pending.push(sub.client, sub)

    def _admit(self) -> None:
        """Round-robin across clients into the engine, up to its batch size."""
        while len(self._active) < self.max_running:
            sub = self._pending.pop()
            if sub is None:
                return
            try:
                self.engine.add_request(sub.prompt_token_ids, sub.params, sub.request_id, cache_salt=sub.cache_salt)
            except PrefixLabError as exc:
                self._send(sub, Update(error=str(exc), finished=True))
                continue
            self._active[sub.request_id] = sub

    def _step(self) -> None:
        try:
            outputs = self.engine.step()
        except Exception:  # a bug must not take the room down: fail the batch, keep serving
            logger.exception("Engine step failed; aborting the requests in flight")
            for request_id, failed in list(self._active.items()):
                self._send(failed, Update(error="The engine failed on this batch; please retry.", finished=True))
                try:
                    self._abort(request_id)
                except Exception:
                    logger.exception("Could not abort %s", request_id)
                    self._active.pop(request_id, None)
            return
        if outputs:  # a step that only computed part of a long prompt says nothing about the wave
            self._last_batch = len(outputs)
        now = time.perf_counter()
        for out in outputs:
            sub = self._active.get(out.request_id)
            if sub is None:
                continue
            if sub.num_tokens_seen == 0:
                self.metrics.observe_first_token(now - sub.arrival, len(out.prompt_token_ids))
                sub.num_created_cache_tokens = self._created_cache_tokens(len(out.prompt_token_ids), out.num_cached_tokens)
            self.metrics.observe_tokens(len(out.token_ids) - sub.num_tokens_seen)
            sub.num_tokens_seen = len(out.token_ids)
            reason = finish_reason(self.engine.get_request(out.request_id).status) if out.finished else None
            self._send(sub, Update(
                text=out.text,
                num_output_tokens=len(out.token_ids),
                num_prompt_tokens=len(out.prompt_token_ids),
                num_cached_tokens=out.num_cached_tokens,
                num_created_cache_tokens=sub.num_created_cache_tokens,
                finished=out.finished,
                finish_reason=reason,
            ))
            if out.finished:
                self._retire(out.request_id, reason or "stop")

    def _created_cache_tokens(self, num_prompt_tokens: int, num_cached_tokens: int) -> int:
        """vLLM's ``created_cache_tokens``: prompt tokens in the request's hashed (cached) blocks once its
        prefill is done, minus those it found cached. Once prefill is done every full prompt block is hashed;
        counted from the sizes, since a request that ends on its first token has already freed its blocks."""
        manager = self.engine.kv_cache_manager
        if not manager.enable_caching:
            return 0
        return max(0, num_prompt_tokens // manager.block_size * manager.block_size - num_cached_tokens)

    def _abort(self, request_id: str) -> None:
        if self._pending.remove(lambda s: s.request_id == request_id) is not None:
            return
        if request_id in self._active:
            self.engine.abort_request(request_id)
            self._retire(request_id, finish_reason(RequestStatus.FINISHED_ABORTED) or "abort")

    def _retire(self, request_id: str, reason: str) -> None:
        del self._active[request_id]
        self.engine.forget_request(request_id)
        self.metrics.observe_finished(reason)

    def _publish_events(self) -> None:
        """One KV-event batch per step that touched the hash table, as vLLM publishes."""
        manager = self.engine.kv_cache_manager
        events = manager.take_events()
        manager.events.drop_taken()
        self.metrics.observe_cache_stats(manager.prefix_cache_stats.queries, manager.prefix_cache_stats.hits)
        tier = self.engine.offloading
        if tier is not None:
            self.metrics.observe_external(tier.stats.external_queries, tier.stats.external_hits,
                                          tier.stats.tokens_by_source)
        if self.residency is not None:
            self.metrics.observe_evictions(self.residency.observe(events, time.monotonic()))
        if self.publisher is not None and events:
            payload = kv_events.encode_batch(events)
            if payload is not None:
                self.publisher.publish(payload)

    @staticmethod
    def _send(sub: Submission, update: Update) -> None:
        try:
            sub.deliver(update)
        except RuntimeError:  # the handler's event loop is gone (server shutting down)
            pass
