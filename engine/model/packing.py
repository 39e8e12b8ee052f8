"""One step's inputs, packed: every scheduled request's new tokens in one flat batch.

Prefill chunks and decodes alike go into one ``[num_tokens]`` row of token ids with their
positions, plus the :class:`~engine.model.attention.AttentionMetadata` that says where each
request's rows sit and which pages hold its earlier tokens. One engine's step is packed this way
(:class:`~engine.model.runner.ModelBackend`), and so are several engines' steps merged into one
forward pass over shared pages (:class:`~engine.model.batching.StepBatcher`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from engine.model.attention import AttentionMetadata
from engine.scheduler import ScheduledRequest


@dataclass
class PackedStep:
    input_ids: torch.Tensor  # [num_tokens]
    positions: torch.Tensor  # [num_tokens]
    meta: AttentionMetadata
    #: Rows whose logits are needed: the last new token of each request that reached its end, in batch
    #: order. Only these go through the vocab matmul (the biggest one in a small model).
    sampling_rows: list[int]


def pack_step(scheduled: Sequence[ScheduledRequest], block_size: int, device: torch.device,
              block_tables: Sequence[list[int]] | None = None) -> PackedStep:
    """Pack ``scheduled`` (in batch order) for one forward pass.

    ``block_tables``: per request, the rows of the page tensor that hold it, when these are not the
    engine's own block ids (an engine's partition of shared pages); ``block_size`` is then that
    tensor's page size.
    """
    token_ids: list[int] = []
    positions: list[int] = []
    chunks = []
    for i, item in enumerate(scheduled):
        start = item.num_computed_tokens
        token_ids += item.token_ids
        positions += range(start, start + item.num_new_tokens)
        chunks.append((item.block_ids if block_tables is None else block_tables[i], start, item.num_new_tokens))
    meta = AttentionMetadata.build(chunks, block_size, device)
    rows = [seq.query_end - 1 for item, seq in zip(scheduled, meta.seqs) if item.samples_token]
    return PackedStep(torch.tensor(token_ids, dtype=torch.long, device=device),
                      torch.tensor(positions, device=device), meta, rows)
