"""One step's inputs, packed: every scheduled request's new tokens in one flat batch.

Prefill chunks and decodes alike go into one ``[num_tokens]`` row of token ids with their
positions, plus the :class:`~engine.model.attention.AttentionMetadata` that says where each
request's rows sit and which pages hold its earlier tokens. One engine's step is packed this way
(:class:`~engine.model.runner.ModelBackend`), and so are several engines' steps merged into one
forward pass over shared pages (:class:`~engine.runtime.batching.StepBatcher`).

Packing has two halves: :func:`step_inputs` reads the scheduler's objects into plain lists
(:class:`StepInputs`, small enough to send to another process) and :func:`pack` turns those into
tensors on the model's device, where the forward pass runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from engine.model.attention import AttentionMetadata
from engine.scheduler import ScheduledRequest


@dataclass
class StepInputs:
    """A step as plain numbers: what a forward pass needs, and nothing of the engine's own objects."""

    token_ids: list[int]
    positions: list[int]
    #: Per request, in batch order: (rows of the page tensor that hold it, tokens before this step, new tokens).
    chunks: list[tuple[list[int], int, int]]
    #: Per request: whether its logits are wanted (its chunk reaches its last known token).
    samples: list[bool]
    #: Per request: whether its token is the argmax (temperature 0), which the pass itself can pick.
    greedy: list[bool] = field(default_factory=list)


@dataclass
class PassOutput:
    """What a pass hands back for its sampling rows, in batch order.

    Every row's argmax is a token already: a greedy request needs nothing else, so only the rows
    that draw at random carry their whole logits (8 greedy rows: 8 ints instead of 1.5 MB).
    """

    argmax: list[int]  # per sampling row
    logits: torch.Tensor  # [sampling rows that draw at random, vocab] float32, in the same order
    drawn: list[bool]  # per sampling row: whether its logits are in ``logits``

    def split(self, counts: Sequence[int]) -> list[PassOutput]:
        """This output cut into consecutive parts of ``counts`` sampling rows (one per merged engine)."""
        parts, row, logit_row = [], 0, 0
        for count in counts:
            drawn = self.drawn[row:row + count]
            parts.append(PassOutput(self.argmax[row:row + count], self.logits[logit_row:logit_row + sum(drawn)], drawn))
            row, logit_row = row + count, logit_row + sum(drawn)
        return parts


def pass_output(logits: torch.Tensor, inputs: StepInputs) -> PassOutput:
    """``logits`` of a pass's sampling rows as a :class:`PassOutput`: argmax for all, whole rows for the drawn."""
    greedy = inputs.greedy or [False] * len(inputs.samples)
    drawn = [not g for g, samples in zip(greedy, inputs.samples) if samples]
    keep = [row for row, d in enumerate(drawn) if d]
    kept = logits if len(keep) == len(drawn) else logits[keep]
    return PassOutput(logits.argmax(dim=-1).tolist(), kept, drawn)


@dataclass
class PackedStep:
    input_ids: torch.Tensor  # [num_tokens]
    positions: torch.Tensor  # [num_tokens]
    meta: AttentionMetadata
    #: Rows whose logits are needed: the last new token of each request that reached its end, in batch
    #: order. Only these go through the vocab matmul (the biggest one in a small model).
    sampling_rows: list[int]


def step_inputs(scheduled: Sequence[ScheduledRequest], block_tables: Sequence[list[int]] | None = None) -> StepInputs:
    """``scheduled`` (in batch order) as plain lists.

    ``block_tables``: per request, the rows of the page tensor that hold it, when these are not the
    engine's own block ids (an engine's partition of shared pages).
    """
    inputs = StepInputs([], [], [], [], [])
    for i, item in enumerate(scheduled):
        start = item.num_computed_tokens
        inputs.token_ids += item.token_ids
        inputs.positions += range(start, start + item.num_new_tokens)
        inputs.chunks.append((item.block_ids if block_tables is None else block_tables[i], start, item.num_new_tokens))
        inputs.samples.append(item.samples_token)
        inputs.greedy.append(item.request.sampling_params.greedy)
    return inputs


def pack(inputs: StepInputs, block_size: int, device: torch.device, decode_kernel: bool = False) -> PackedStep:
    """Tensors for one forward pass; ``block_size`` is the page tensor's (tokens per page); ``decode_kernel``:
    the decodes go to the CPU kernel (:func:`engine.model.native.kernels_for` the weights)."""
    meta = AttentionMetadata.build(inputs.chunks, block_size, device, decode_kernel=decode_kernel)
    rows = [seq.query_end - 1 for samples, seq in zip(inputs.samples, meta.seqs) if samples]
    return PackedStep(torch.tensor(inputs.token_ids, dtype=torch.long, device=device),
                      torch.tensor(inputs.positions, device=device), meta, rows)


def pack_step(scheduled: Sequence[ScheduledRequest], block_size: int, device: torch.device,
              block_tables: Sequence[list[int]] | None = None, decode_kernel: bool = False) -> PackedStep:
    """Pack ``scheduled`` (in batch order) for one forward pass (:func:`step_inputs`, then :func:`pack`)."""
    return pack(step_inputs(scheduled, block_tables), block_size, device, decode_kernel)
