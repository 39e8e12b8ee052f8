"""Paged attention in plain PyTorch: write the new K/V into the pages, read each context back.

A step packs every scheduled request's new tokens into one flat batch (``[num_tokens, ...]``).
:class:`AttentionMetadata` says where each request's tokens sit in that batch and which cache
blocks hold its earlier tokens. Attention then runs per request: the new queries attend to the
request's whole context (cached prefix + this chunk), causally within the chunk. The cached
prefix is never recomputed: its K/V are simply read from the pages.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from engine.model.kv_tensors import LayerKVCache, slot_mapping


@dataclass
class SequenceSlice:
    """One request's part of the packed batch."""

    query_start: int  # first row of its new tokens in the packed batch
    query_len: int  # how many new tokens it computes this step
    context_len: int  # tokens it can see after this step: cached/computed before + new
    block_table: torch.Tensor  # the blocks covering [0, context_len), in order
    mask: torch.Tensor | None  # [query_len, context_len] bool, True = may attend; None: no explicit mask
    is_causal: bool  # True: plain causal (a prefill from position 0); False with no mask: a decode sees everything

    @property
    def query_end(self) -> int:
        return self.query_start + self.query_len


@dataclass
class AttentionMetadata:
    """Everything attention needs about the batch, built once per step and shared by all layers."""

    slot_mapping: torch.Tensor  # [num_tokens] flat cache slot of each new token
    seqs: list[SequenceSlice] = field(default_factory=list)

    @classmethod
    def build(cls, chunks: list[tuple[list[int], int, int]], block_size: int, device: torch.device | str) -> AttentionMetadata:
        """``chunks``: per request ``(block_table, num_computed_tokens, num_new_tokens)``, in batch order."""
        slots: list[int] = []
        seqs = []
        for block_table, start, num_new in chunks:
            end = start + num_new
            slots += slot_mapping(block_table, start, end, block_size)
            num_ctx_blocks = -(-end // block_size)
            if num_new == 1 or start == 0:
                # A decode sees its whole context: no mask. A fresh prefill is plain causal.
                mask, is_causal = None, num_new > 1
            else:
                # A chunk after a cached/computed prefix: query i sits at position start + i and may
                # see keys 0 .. start + i (all of the prefix, and the chunk up to itself).
                key_pos = torch.arange(end, device=device)
                query_pos = torch.arange(start, end, device=device)
                mask, is_causal = key_pos[None, :] <= query_pos[:, None], False
            seqs.append(SequenceSlice(
                query_start=len(slots) - num_new, query_len=num_new, context_len=end,
                block_table=torch.tensor(block_table[:num_ctx_blocks], dtype=torch.long, device=device),
                mask=mask, is_causal=is_causal,
            ))
        return cls(torch.tensor(slots, dtype=torch.long, device=device), seqs)


def paged_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache: LayerKVCache,
                    meta: AttentionMetadata, scale: float) -> torch.Tensor:
    """Attention of the packed new tokens over their paged contexts.

    ``q``: ``[num_tokens, n_heads, head_dim]``; ``k``, ``v``: ``[num_tokens, n_kv_heads, head_dim]``.
    Grouped-query attention (fewer K/V heads than query heads) is handled by SDPA's ``enable_gqa``.
    """
    cache.write(k, v, meta.slot_mapping)
    out = torch.empty_like(q)
    for seq in meta.seqs:
        k_ctx, v_ctx = cache.read(seq.block_table, seq.context_len)
        # SDPA wants [batch, heads, tokens, head_dim].
        q_seq = q[seq.query_start:seq.query_end].transpose(0, 1).unsqueeze(0)
        o = F.scaled_dot_product_attention(
            q_seq, k_ctx.transpose(0, 1).unsqueeze(0), v_ctx.transpose(0, 1).unsqueeze(0),
            attn_mask=seq.mask, is_causal=seq.is_causal, scale=scale, enable_gqa=True,
        )
        out[seq.query_start:seq.query_end] = o[0].transpose(0, 1)
    return out
