"""One forward pass for many engines: each keeps its own scheduler, pool and sampler; the model runs once.

A server gives every browser session its own :class:`~engine.llm_engine.LLMEngine`, so each student
sees their own block ids. Run one by one, ten students generating cost ten single-request forward
passes in a row. Here a session's back end (:class:`BatchedBackend`) hands its scheduled step to the
server's :class:`StepBatcher` and waits; the batcher packs every step waiting at that moment into
one batch (each engine's blocks mapped to its partition of :class:`~engine.runtime.shared_pages.SharedPages`),
has its :class:`~engine.runtime.executor.Executor` run ONE forward pass (here or in a worker process),
and gives each session its own sampling rows: a greedy row's argmax is its token; a row that draws
at random comes with its logits, and the session draws with its own sampler (request ids such as
``req-0`` repeat across engines, so nothing shared is keyed by them). This is vLLM's continuous batching, with the engines kept apart for teaching.

No thread of its own: the first waiting session that finds the model idle runs the pass for
everyone waiting (the leader); the others sleep on a condition until their part is done.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass

from engine.config import EngineConfig
from engine.errors import ConfigError, PrefixLabError
from engine.model.packing import PassOutput, step_inputs
from engine.model.runner import ModelBackend
from engine.model.weights import ModelShape
from engine.runtime.executor import Executor
from engine.runtime.shared_pages import SharedPages, physical_rows
from engine.scheduler import ScheduledRequest, SchedulerOutput

#: New tokens in one merged forward pass: a big prefill chunk cannot hold everyone's decode for long
#: (steps are taken in arrival order; what does not fit goes in the next pass).
MAX_TOKENS_PER_PASS = 1_024
#: How long a session waits for its part of a pass before it gives up with an error.
STEP_TIMEOUT_S = 120.0
#: How long a pass may wait for the sessions of the pass before it to come back with their next step
#: (each first samples its token and schedules again): they then share one pass instead of splitting
#: into two half-full ones. Not waited for when the last pass served only one session, nor while a
#: waiting step samples a request's first token.
GATHER_S = 0.02


@dataclass(eq=False)
class Submission:
    """One engine's step, waiting for (or done by) a merged forward pass."""

    scheduled: list[ScheduledRequest]
    base: int  # the engine's first row in the shared pages
    block_size: int  # the engine's block size (tokens per block)
    output: PassOutput | None = None  # its sampling rows' part of the pass, when done
    error: BaseException | None = None
    done: bool = False

    @property
    def num_tokens(self) -> int:
        return sum(item.num_new_tokens for item in self.scheduled)

    @property
    def samples_a_first_token(self) -> bool:
        """A student is waiting for their answer to start (time to first token)."""
        return any(item.samples_token and item.request.num_output_tokens == 0 for item in self.scheduled)


class StepBatcher:
    """The server's model: merges the steps of every engine on its executor's pages into as few forward
    passes as it can, and has the executor run each."""

    def __init__(self, executor: Executor, max_tokens: int = MAX_TOKENS_PER_PASS, timeout_s: float = STEP_TIMEOUT_S,
                 gather_s: float = GATHER_S) -> None:
        self.executor = executor
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.gather_s = gather_s
        lock = threading.Lock()
        self._cond = threading.Condition(lock)  # a pass finished
        self._arrived = threading.Condition(lock)  # a step was submitted
        self._pending: deque[Submission] = deque()
        self._running = False
        self._last_pass_steps = 0
        #: Forward passes run and steps served (a pass serving several steps is the point).
        self.num_passes = 0
        self.num_steps = 0

    @property
    def model(self) -> ModelShape:
        """The model every engine on this batcher runs (its weights wherever the executor keeps them)."""
        return self.executor.model

    @property
    def pages(self) -> SharedPages:
        """The shared pages engines take their rows of."""
        return self.executor.pages

    def run(self, scheduled: list[ScheduledRequest], base: int, block_size: int) -> PassOutput:
        """Compute one engine's step in the next merged pass; returns its sampling rows' part of it."""
        part = Submission(scheduled, base, block_size)
        deadline = time.monotonic() + self.timeout_s
        with self._cond:
            self._pending.append(part)
            self._arrived.notify()
        while True:
            with self._cond:
                while self._running and not part.done:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        if part in self._pending:
                            self._pending.remove(part)
                        raise PrefixLabError(f"The shared model is too busy: this step waited {self.timeout_s:.0f} s. "
                                             "Try again in a minute.")
                    self._cond.wait(remaining)
                if part.done:
                    break
                self._running = True  # the model is idle and our part still waits: lead this pass
                try:
                    self._gather()
                    batch = self._take()
                except BaseException:  # no pass after all: never leave the others waiting for one
                    self._running = False
                    self._cond.notify_all()
                    raise
            try:
                self._forward(batch)
            except Exception as exc:  # every waiting session gets the error, none hangs
                for each in batch:
                    each.error = exc
            finally:
                with self._cond:
                    for each in batch:
                        if each.output is None and each.error is None:
                            each.error = RuntimeError("the forward pass was interrupted")
                        each.done = True
                    self.num_passes += 1
                    self.num_steps += len(batch)
                    self._last_pass_steps = len(batch)
                    self._running = False
                    self._cond.notify_all()
        if part.error is not None:
            raise RuntimeError(f"The shared forward pass failed: {part.error}") from part.error
        assert part.output is not None
        return part.output

    def _gather(self) -> None:
        """Wait (at most ``gather_s``) until as many steps wait as the last pass served, unless one of them
        samples a first token. Called with the lock held; the wait releases it."""
        gather_until = time.monotonic() + self.gather_s
        while (len(self._pending) < self._last_pass_steps and (left := gather_until - time.monotonic()) > 0
               and not any(each.samples_a_first_token for each in self._pending)):
            self._arrived.wait(left)

    def _take(self) -> list[Submission]:
        """Waiting steps in arrival order, up to ``max_tokens`` new tokens (always at least one step).

        Steps that sample a request's first token go first, in a pass of their own: the decodes wait
        one short pass, and a student who just pressed Send does not wait for everyone's decode (what
        vLLM's V0 scheduler did by running prefills before decodes).
        """
        first = [part for part in self._pending if part.samples_a_first_token]
        batch: list[Submission] = []
        tokens = 0
        for part in first or list(self._pending):
            if batch and tokens + part.num_tokens > self.max_tokens:
                break
            batch.append(part)
            tokens += part.num_tokens
        for part in batch:
            self._pending.remove(part)
        return batch

    def _forward(self, batch: list[Submission]) -> None:
        scheduled = [item for part in batch for item in part.scheduled]
        tables = [physical_rows(item.block_ids, part.base, part.block_size) for part in batch for item in part.scheduled]
        inputs = step_inputs(scheduled, tables)
        output = self.executor.run(inputs, self.timeout_s)
        counts = [sum(item.samples_token for item in part.scheduled) for part in batch]
        for part, share in zip(batch, output.split(counts)):
            part.output = share


class BatchedBackend(ModelBackend):
    """One engine's back end on a server's shared model: its own partition of the shared pages and its
    own sampler; its forward passes are merged with every other engine's by ``batcher``."""

    def __init__(self, config: EngineConfig, batcher: StepBatcher) -> None:
        super().__init__(config, weights=batcher.model)
        self.batcher = batcher
        self.threads = None  # the batcher sets the threads of the pass
        self.base = 0

    @property
    def num_blocks(self) -> int:
        """What ``config.kv_cache_memory_mib`` buys, on any device (the shared pages are the budget)."""
        return self.blocks_in(self.config.kv_cache_memory_mib * 2**20)

    def allocate_kv_cache(self, num_blocks: int, block_size: int) -> None:
        """Take this engine's range of the shared pages (until this back end is garbage)."""
        if self.kv_cache is not None:
            raise ConfigError("This BatchedBackend already holds another engine's share of the KV pages; "
                              "give each engine its own back end.")
        self.base = self.batcher.pages.reserve(num_blocks, block_size, owner=self)
        self.kv_cache = self.batcher.pages.partition(self.base, num_blocks, block_size)

    def allocate_host_kv_cache(self, num_chunks: int) -> None:
        raise ConfigError("KV offloading is not available with merged passes (the app's shared model): "
                          "use one engine on its own model, e.g. `prefixlab serve --kv-offloading-size`.")

    def execute(self, scheduler_output: SchedulerOutput) -> dict[str, int]:
        if self.kv_cache is None:
            raise RuntimeError("allocate_kv_cache() must run before execute().")
        scheduled = scheduler_output.scheduled
        if not scheduled:
            return {}
        output = self.batcher.run(scheduled, self.base, self.kv_cache.block_size)
        sampling = [item for item in scheduled if item.samples_token]
        tokens = dict(zip((item.request_id for item in sampling), output.argmax))  # the greedy rows are done
        drawing = [item for item, drawn in zip(sampling, output.drawn) if drawn]
        if drawing:
            tokens.update(self.sample(drawing, output.logits))
        return tokens
