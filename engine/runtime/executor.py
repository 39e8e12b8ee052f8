"""``Executor``: where a server's merged forward passes run, behind one interface.

A :class:`~engine.runtime.batching.StepBatcher` packs many engines' steps into one pass and hands
it to its executor as plain lists (:class:`~engine.model.packing.StepInputs`); the executor answers
with a :class:`~engine.model.packing.PassOutput`: each sampling row's argmax, and the logits of the
rows that draw at random. Two implementations, chosen by whoever builds the
server, invisible to the engines:

* :class:`InProcessExecutor`: the pass runs here, on weights in this process (tests, notebooks,
  one engine on a quiet machine);
* :class:`~engine.runtime.worker.WorkerExecutor`: the pass runs in a worker process that holds the
  weights and the real KV pages (the app and ``prefixlab serve``: their other threads would keep
  the GIL from the pass).

Either way the executor's :attr:`Executor.pages` hands out each engine's rows of the shared pages;
for a worker they are shape-only here, the real ones being in the worker.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

from engine.model.native import kernels_for
from engine.model.packing import PassOutput, StepInputs, pack, pass_output
from engine.model.threads import ThreadPolicy
from engine.model.weights import ModelShape, ModelWeights
from engine.runtime.shared_pages import SharedPages


class Executor(ABC):
    """Runs merged forward passes on a model whose shape is :attr:`model`, over :attr:`pages`."""

    model: ModelShape
    pages: SharedPages

    @abstractmethod
    def run(self, inputs: StepInputs, timeout_s: float) -> PassOutput:
        """One forward pass over ``inputs`` (writing their K/V): what its sampling rows need to pick a token."""

    def close(self) -> None:
        """Release what the executor holds (a worker process); nothing to release by default."""
        return None


def merged_pass(weights: ModelWeights, pages: SharedPages, inputs: StepInputs, decode_kernel: bool = False) -> torch.Tensor:
    """One forward pass over several engines' steps on the shared pages (one token per page row)."""
    return weights.logits(pack(inputs, 1, weights.device, decode_kernel), pages.cache)


class InProcessExecutor(Executor):
    """The pass runs in this process, on ``weights``, over ``budget_mib`` MiB of shared pages."""

    def __init__(self, weights: ModelWeights, budget_mib: int, threads: int | None = None) -> None:
        """``threads``: the most CPU threads a pass may use (default: every core; fewer when the machine
        is busy, see :mod:`~engine.model.threads`)."""
        self.model = self.weights = weights
        self.pages = SharedPages(weights, budget_mib)
        self.threads = ThreadPolicy(threads) if weights.device.type == "cpu" else None
        self.decode_kernel = kernels_for(weights.device, weights.dtype)

    @torch.inference_mode()
    def run(self, inputs: StepInputs, timeout_s: float) -> PassOutput:
        if self.threads is not None:
            self.threads.apply()
        return pass_output(merged_pass(self.weights, self.pages, inputs, self.decode_kernel), inputs)
