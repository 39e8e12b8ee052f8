"""Paged attention in plain PyTorch: write the new K/V into the pages, read each context back.

A step packs every scheduled request's new tokens into one flat batch (``[num_tokens, ...]``).
:class:`AttentionMetadata` says where each request's tokens sit in that batch and which cache
blocks hold its earlier tokens. The new queries attend to the request's whole context (cached
prefix + this chunk), causally within the chunk. The cached prefix is never recomputed: its K/V
are simply read from the pages.

Two paths, both one kernel call per group rather than per token:

* **decodes** (one new token each) are attended all together. Requests that share a cached prefix
  share its blocks, and so their first block (hashes chain: sharing block i means sharing every
  block before it). The decodes are grouped by that first block; each group's blocks (the *union*
  of its members' tables) are gathered once into a row of ``[groups, context, ...]``, padded to the
  longest union, and each request's query rows are masked to its own keys (softmax attention does
  not care in which order the keys come). Gathering a shared prefix once per request would copy the
  same blocks again and again; vLLM's cascade attention exploits the same sharing. With nothing
  shared every group is one request: its own blocks, padded to the longest table. When the whole
  batch shares most of its context, or its blocks lie in one run of consecutive ids (as a fresh pool
  hands them out), the batch is one group, and that run is read in place, with no gather.
* **prefill chunks** (several new tokens) run one request at a time; a prefill from position 0
  needs no cache read at all (its keys are exactly this step's keys), a chunk whose context lies in
  consecutive blocks reads it in place.

Grouped-query attention (fewer K/V heads than query heads) never repeats K/V: where a mask is
needed, the query heads that share a K/V head are laid out as more query rows of that head
(:func:`rows_per_kv_head`); a prefill from position 0 lets SDPA pair the heads (``enable_gqa``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from engine.model import native
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
    span: tuple[int, int] | None = None  # (first block, count): its blocks lie in this run, read in place
    biases: dict[torch.dtype, torch.Tensor] = field(default_factory=dict, repr=False)  # see attention_bias

    @property
    def query_end(self) -> int:
        return self.query_start + self.query_len


@dataclass
class DecodeBatch:
    """All one-token requests of the step, attended in one call.

    Grouped (``shared_blocks`` is None): ``block_tables`` ``[groups, max_blocks]``, each group's union
    of blocks padded with block 0 (the pool's null block); ``key_mask`` ``[groups, slots, max_blocks *
    block_size]``, which keys the request in each slot of a group sees (a group has up to ``slots``
    requests); ``slots`` ``[num_decodes]``, each request's place ``group * slots + slot`` (None when
    request i is in place i, e.g. every request a group of its own).
    One shared context: ``shared_blocks`` ``[num_blocks]`` is the union of all their blocks, read once,
    and ``key_mask`` ``[num_decodes, num_blocks * block_size]`` says which of those keys each sees. When
    ``span_start`` is set, ``shared_blocks`` are the consecutive blocks from there (the union and the
    few free or foreign blocks between, masked out): read in place, without a copy.
    """

    rows: torch.Tensor  # [num_decodes] their rows in the packed batch
    block_tables: torch.Tensor | None
    key_mask: torch.Tensor | None  # bool: True = a key this request attends to (None: the kernel's batch)
    contiguous_from: int | None  # the rows are start..start+n-1 (a slice, no gather); None otherwise
    slots: torch.Tensor | None = None  # grouped: each request's group * slots_per_group + slot; None: its own index
    slots_per_group: int = 1
    shared_blocks: torch.Tensor | None = None
    span_start: int | None = None
    biases: dict[torch.dtype, torch.Tensor] = field(default_factory=dict, repr=False)  # see attention_bias
    #: For the CPU kernel (:func:`~engine.model.native.paged_decode_attention`), which reads every request's
    #: pages in place: ``block_tables`` ``[num_decodes, max_blocks]`` one per request, and the positions
    #: each sees, ``first_positions[i]`` (None: 0) .. ``context_lens[i] - 1``. None on the PyTorch paths.
    context_lens: torch.Tensor | None = None
    first_positions: torch.Tensor | None = None


@dataclass
class AttentionMetadata:
    """Everything attention needs about the batch, built once per step and shared by all layers."""

    slot_mapping: torch.Tensor  # [num_tokens] flat cache slot of each new token
    seqs: list[SequenceSlice] = field(default_factory=list)  # every request, in batch order
    decode: DecodeBatch | None = None  # the one-token requests, batched
    num_tokens: int = 0
    sliding_window: int | None = None  # each query sees only the last this-many positions (itself included)
    chunks: list[tuple[list[int], int, int]] = field(default_factory=list, repr=False)  # what build() was given
    block_size: int = 0
    decode_kernel: bool = False  # decodes go to the CPU kernel (see build)
    windowed: dict[int, AttentionMetadata] = field(default_factory=dict, repr=False)

    def for_window(self, sliding_window: int | None) -> AttentionMetadata:
        """The same batch for a sliding-window layer (built once per window, shared by its layers)."""
        if sliding_window is None or sliding_window == self.sliding_window:
            return self
        if sliding_window not in self.windowed:
            self.windowed[sliding_window] = AttentionMetadata.build(
                self.chunks, self.block_size, self.slot_mapping.device, sliding_window, self.decode_kernel)
        return self.windowed[sliding_window]

    @property
    def prefills(self) -> list[SequenceSlice]:
        """Requests computing more than one token this step."""
        return [seq for seq in self.seqs if seq.query_len > 1]

    @classmethod
    def build(cls, chunks: list[tuple[list[int], int, int]], block_size: int, device: torch.device | str,
              sliding_window: int | None = None, decode_kernel: bool = False) -> AttentionMetadata:
        """``chunks``: per request ``(block_table, num_computed_tokens, num_new_tokens)``, in batch order.

        ``decode_kernel``: the decodes will be attended by the CPU kernel, which needs only each request's
        table and length (:func:`kernel_decode`); otherwise they are grouped for the PyTorch path.

        With ``sliding_window`` W, query position q sees keys q - W < k <= q (transformers' and vLLM's
        convention); every mask below gets that lower edge, and a prefill from position 0 longer than
        the window needs an explicit mask instead of plain causal attention.
        """
        window = sliding_window
        slots: list[int] = []
        seqs = []
        decode_rows: list[int] = []
        decode_tables: list[list[int]] = []
        decode_lens: list[int] = []
        for block_table, start, num_new in chunks:
            end = start + num_new
            slots += slot_mapping(block_table, start, end, block_size)
            table = block_table[:-(-end // block_size)]
            mask, span = None, None
            if num_new == 1:
                decode_rows.append(len(slots) - 1)
                decode_tables.append(table)
                decode_lens.append(end)
            elif start > 0 or (window is not None and end > window):
                # A chunk after a cached/computed prefix: query i sits at position start + i and may
                # see keys 0 .. start + i (all of the prefix, and the chunk up to itself).
                query_pos = torch.arange(start, end, device=device)
                span = (min(table), max(table) + 1 - min(table)) if consecutive_enough(table) else None
                key_pos = key_positions(table, span, block_size, device) if span else torch.arange(end, device=device)
                mask = (key_pos[None, :] >= 0) & (key_pos[None, :] <= query_pos[:, None])
                if window is not None:
                    mask &= key_pos[None, :] > query_pos[:, None] - window
            seqs.append(SequenceSlice(
                query_start=len(slots) - num_new, query_len=num_new, context_len=end,
                block_table=torch.tensor(table, dtype=torch.long, device=device),
                mask=mask, is_causal=num_new > 1 and mask is None, span=span,
            ))
        decode = None
        if decode_rows:
            first = decode_rows[0]
            contiguous = first if decode_rows == list(range(first, first + len(decode_rows))) else None
            rows = torch.tensor(decode_rows, dtype=torch.long, device=device)
            if decode_kernel:
                decode = kernel_decode(rows, contiguous, decode_tables, decode_lens, device, window)
            elif reads_shared_context(decode_tables, groups := prefix_groups(decode_tables)):
                decode = shared_context_decode(rows, contiguous, decode_tables, decode_lens, block_size, device, window)
            else:
                decode = grouped_decode(rows, contiguous, decode_tables, decode_lens, groups, block_size, device, window)
        return cls(torch.tensor(slots, dtype=torch.long, device=device), seqs, decode, len(slots),
                   sliding_window=window, chunks=chunks, block_size=block_size, decode_kernel=decode_kernel)


#: A group of decodes sharing a prefix reads the union of their blocks once when that union is at most
#: this many times its longest table: every query of the group scores every key of the union, so a union
#: much wider than one request's context costs more arithmetic than the copies it saves.
SHARED_CONTEXT_MAX_WIDENING = 4


def reads_shared_context(tables: list[list[int]], groups: list[list[int]]) -> bool:
    """Whether a decode batch is one group (``groups``: :func:`prefix_groups` of ``tables``): every request
    shares its first block (so a prefix) and their union is not much wider than one request's context. A
    lone request counts when its blocks lie in one run (read in place, no copy)."""
    return len(groups) == 1 and (len(tables) > 1 or consecutive_enough(tables[0]))


#: Read a shared context's blocks in place, as one run of consecutive blocks, when that run is at most
#: this many times the union: each masked-out block in it costs a little arithmetic, a gather costs a copy.
SHARED_SPAN_MAX_WIDENING = 1.25


def key_positions(table: list[int], span: tuple[int, int], block_size: int, device: torch.device | str) -> torch.Tensor:
    """For each key slot of the run of blocks ``span`` (first block, count): the position in the
    request's context of the token it holds, or -1 where the block is not one of the request's."""
    first, count = span
    positions = torch.full((count, block_size), -1, dtype=torch.long, device=device)
    blocks = torch.tensor(table, dtype=torch.long, device=device) - first
    positions[blocks] = torch.arange(len(table) * block_size, device=device).view(len(table), block_size)
    return positions.view(-1)


def consecutive_enough(blocks: Collection[int]) -> bool:
    """Whether ``blocks`` (distinct ids) lie in a run of consecutive blocks at most SHARED_SPAN_MAX_WIDENING
    times their number."""
    return max(blocks) + 1 - min(blocks) <= SHARED_SPAN_MAX_WIDENING * len(blocks)


def shared_context_decode(rows: torch.Tensor, contiguous_from: int | None, tables: list[list[int]], lens: list[int],
                          block_size: int, device: torch.device | str, window: int | None = None) -> DecodeBatch:
    """A decode batch over the union of its blocks: which of the union's keys each request may see."""
    blocks = sorted({b for t in tables for b in t})
    span_start = blocks[0] if consecutive_enough(blocks) else None
    if span_start is not None:
        blocks = list(range(span_start, blocks[-1] + 1))
    union = torch.tensor(blocks, dtype=torch.long, device=device)
    mask = union_key_mask(tables, lens, blocks, block_size, device, window)
    return DecodeBatch(rows, None, mask, contiguous_from, shared_blocks=union, span_start=span_start)


def union_key_mask(tables: list[list[int]], lens: list[int], union: list[int], block_size: int,
                   device: torch.device | str, window: int | None = None) -> torch.Tensor:
    """``[len(tables), len(union) * block_size]``: which keys of the blocks ``union`` (sorted, holding every
    block of ``tables``) each request sees: its own blocks' tokens up to its length (and in its window)."""
    union_ids = torch.tensor(union, dtype=torch.long, device=device)
    flat = torch.tensor([b for t in tables for b in t], dtype=torch.long, device=device)
    owner = torch.tensor([r for r, t in enumerate(tables) for _ in t], dtype=torch.long, device=device)
    index_in_table = torch.tensor([j for t in tables for j in range(len(t))], device=device)
    # Tokens of each (request, block) that hold context: all of a full block, fewer in the last one.
    filled = (torch.tensor(lens, device=device)[owner] - index_in_table * block_size).clamp(0, block_size)
    mask = torch.zeros(len(tables), len(union), block_size, dtype=torch.bool, device=device)
    visible = torch.arange(block_size, device=device)[None, :] < filled[:, None]
    if window is not None:  # and not before the window: position >= len - window
        position = index_in_table[:, None] * block_size + torch.arange(block_size, device=device)[None, :]
        visible &= position >= (torch.tensor(lens, device=device)[owner] - window)[:, None]
    mask[owner, torch.searchsorted(union_ids, flat)] = visible
    return mask.view(len(tables), -1)


def prefix_groups(tables: list[list[int]]) -> list[list[int]]:
    """The decodes (indices into ``tables``) grouped by their first block, i.e. by the prefix they share. A
    group whose union is too wide (SHARED_CONTEXT_MAX_WIDENING) splits into its requests; every request is
    on its own when the groups, padded to the widest union, would not read fewer blocks than one padded
    table each."""
    by_first: dict[int, list[int]] = {}
    for i, table in enumerate(tables):
        by_first.setdefault(table[0], []).append(i)
    groups: list[list[int]] = []
    widest_union = 0
    for group in by_first.values():
        union = len({b for i in group for b in tables[i]})
        if union <= SHARED_CONTEXT_MAX_WIDENING * max(len(tables[i]) for i in group):
            groups.append(group)
            widest_union = max(widest_union, union)
        else:
            groups.extend([i] for i in group)
            widest_union = max(widest_union, *(len(tables[i]) for i in group))
    if len(groups) * widest_union < len(tables) * max(len(t) for t in tables):
        return groups
    return [[i] for i in range(len(tables))]


def grouped_decode(rows: torch.Tensor, contiguous_from: int | None, tables: list[list[int]], lens: list[int],
                   groups: list[list[int]], block_size: int, device: torch.device | str,
                   window: int | None = None) -> DecodeBatch:
    """A decode batch in ``groups`` of requests sharing a prefix (:func:`prefix_groups`, see module doc): each
    group's union of blocks, padded to the widest, and which of its keys each request of the group sees."""
    unions = [sorted({b for i in group for b in tables[i]}) for group in groups]
    width, slots = max(len(u) for u in unions), max(len(g) for g in groups)
    mask = torch.zeros(len(groups), slots, width * block_size, dtype=torch.bool, device=device)
    mask[:, :, 0] = True  # an empty slot sees one key (its row is dropped): a row seeing none would be NaN
    place = [0] * len(tables)
    for g, (group, union) in enumerate(zip(groups, unions)):
        mask[g, :len(group), :len(union) * block_size] = union_key_mask(
            [tables[i] for i in group], [lens[i] for i in group], union, block_size, device, window)
        for slot, i in enumerate(group):
            place[i] = g * slots + slot
    padded = torch.tensor([u + [0] * (width - len(u)) for u in unions], dtype=torch.long, device=device)
    in_place = place == list(range(len(groups) * slots))
    return DecodeBatch(rows, padded, mask, contiguous_from, slots_per_group=slots,
                       slots=None if in_place else torch.tensor(place, dtype=torch.long, device=device))


def kernel_decode(rows: torch.Tensor, contiguous_from: int | None, tables: list[list[int]], lens: list[int],
                  device: torch.device | str, window: int | None = None) -> DecodeBatch:
    """A decode batch for the CPU kernel: each request's own table (padded with block 0) and what it sees."""
    width = max(len(t) for t in tables)
    padded = torch.tensor([t + [0] * (width - len(t)) for t in tables], dtype=torch.long, device=device)
    first = None if window is None else torch.tensor([max(0, n - window) for n in lens], dtype=torch.long, device=device)
    return DecodeBatch(rows, padded, None, contiguous_from, context_lens=torch.tensor(lens, dtype=torch.long, device=device),
                       first_positions=first)


def attention_bias(memo: dict[torch.dtype, torch.Tensor], dtype: torch.dtype,
                   make_mask: Callable[[], torch.Tensor]) -> torch.Tensor:
    """The boolean mask ``make_mask()`` (True = may attend) as the float bias SDPA adds to the scores
    (0 or -inf), made by the first layer and kept in ``memo`` for the others: given a boolean mask,
    SDPA would convert it again in every layer."""
    if dtype not in memo:
        mask = make_mask()
        memo[dtype] = torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float("-inf"))
    return memo[dtype]


def rows_per_kv_head(q: torch.Tensor, num_kv_heads: int) -> torch.Tensor:
    """``[tokens, n_heads, dim]`` -> ``[n_kv_heads, group * tokens, dim]``: each K/V head's query rows.

    HF orders query heads so that head ``h`` reads K/V head ``h // group``; row ``j * tokens + i``
    of K/V head ``g`` is token ``i`` of query head ``g * group + j``. :func:`heads_from_rows` undoes it.
    """
    tokens, n_heads, dim = q.shape
    return q.transpose(0, 1).reshape(num_kv_heads, (n_heads // num_kv_heads) * tokens, dim)


def heads_from_rows(o: torch.Tensor, n_heads: int) -> torch.Tensor:
    """The inverse of :func:`rows_per_kv_head`: ``[n_kv_heads, group * tokens, dim]`` -> ``[tokens, n_heads, dim]``."""
    return o.reshape(n_heads, -1, o.shape[-1]).transpose(0, 1)


def decode_attention(q: torch.Tensor, cache: LayerKVCache, batch: DecodeBatch, scale: float) -> torch.Tensor:
    """Attention of one new query per request over its paged context: ``[num_decodes, n_heads, head_dim]``.

    Grouped-query attention without copying K/V per query head: the ``n_heads / n_kv_heads`` query
    heads that share a K/V head become that head's "query rows", so SDPA sees plain multi-head
    attention over ``n_kv_heads`` heads (HF orders query heads so that head ``h`` reads K/V head
    ``h // group``).
    """
    num, n_heads, head_dim = q.shape
    if batch.context_lens is not None:
        assert batch.block_tables is not None
        return native.paged_decode_attention(q, cache.k, cache.v, batch.block_tables, batch.context_lens,
                                             batch.first_positions, scale)
    if batch.shared_blocks is not None:
        return shared_context_attention(q, cache, batch, scale)
    assert batch.block_tables is not None
    k, v = cache.gather(batch.block_tables)  # [groups, context, n_kv_heads, head_dim] each
    groups, slots, n_kv = k.shape[0], batch.slots_per_group, k.shape[2]
    group = n_heads // n_kv
    if batch.slots is not None:  # place each query in its group's slot (some slots may stay empty)
        q = q.new_zeros(groups * slots, n_heads, head_dim).index_copy_(0, batch.slots, q)
    # Each group's query rows per K/V head: slot s, query head j of the K/V head -> row s * group + j.
    rows = q.view(groups, slots, n_kv, group, head_dim).transpose(1, 2).reshape(groups, n_kv, slots * group, head_dim)
    key_mask = batch.key_mask
    assert key_mask is not None
    bias = attention_bias(batch.biases, q.dtype, lambda: key_mask.repeat_interleave(group, dim=1)[:, None])
    o = F.scaled_dot_product_attention(rows, k.transpose(1, 2), v.transpose(1, 2), attn_mask=bias, scale=scale)
    o = o.view(groups, n_kv, slots, group, head_dim).transpose(1, 2).reshape(groups * slots, n_heads, head_dim)
    return o if batch.slots is None else o.index_select(0, batch.slots)


def shared_context_attention(q: torch.Tensor, cache: LayerKVCache, batch: DecodeBatch, scale: float) -> torch.Tensor:
    """Decode attention over the union of the batch's blocks, each block read once (see module doc).

    All requests' queries become rows of one call: request ``r``'s query heads of K/V head ``g``
    are rows ``r * group ... r * group + group - 1`` of head ``g``, masked to ``r``'s own keys.
    """
    assert batch.shared_blocks is not None
    num, n_heads, head_dim = q.shape
    if batch.span_start is not None:
        k, v = cache.read_span(batch.span_start, batch.shared_blocks.shape[0])  # [span tokens, n_kv_heads, head_dim]
    else:
        k, v = cache.read_blocks(batch.shared_blocks)  # [union tokens, n_kv_heads, head_dim]
    n_kv = k.shape[1]
    group = n_heads // n_kv
    rows = q.view(num, n_kv, group, head_dim).permute(1, 0, 2, 3).reshape(n_kv, num * group, head_dim)
    key_mask = batch.key_mask
    assert key_mask is not None
    bias = attention_bias(batch.biases, q.dtype, lambda: key_mask.repeat_interleave(group, dim=0))
    # Four dimensions ([batch, heads, tokens, dim]): with three, SDPA falls back to its slow math path.
    o = F.scaled_dot_product_attention(rows[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None], attn_mask=bias,
                                       scale=scale)[0]
    return o.view(n_kv, num, group, head_dim).permute(1, 0, 2, 3).reshape(num, n_heads, head_dim)


def prefill_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache: LayerKVCache,
                      seq: SequenceSlice, scale: float) -> torch.Tensor:
    """Attention of one request's chunk of new tokens: ``[query_len, n_heads, head_dim]``."""
    rows = slice(seq.query_start, seq.query_end)
    if seq.is_causal:  # from position 0: this step's keys are the whole context
        # SDPA wants [batch, heads, tokens, head_dim].
        o = F.scaled_dot_product_attention(
            q[rows].transpose(0, 1).unsqueeze(0), k[rows].transpose(0, 1).unsqueeze(0), v[rows].transpose(0, 1).unsqueeze(0),
            is_causal=True, scale=scale, enable_gqa=True,
        )
        return o[0].transpose(0, 1)
    # After a cached prefix: every query reads the whole prefix. Each K/V head's query heads become
    # its query rows, so the keys are read once per K/V head (and the kernel's work splits evenly).
    mask = seq.mask
    assert mask is not None
    if seq.span is not None:  # its blocks lie in one run: read in place (the mask skips others' blocks)
        k_ctx, v_ctx = cache.read_span(*seq.span)
    else:
        k_ctx, v_ctx = cache.read(seq.block_table, seq.context_len)
    n_heads, n_kv = q.shape[1], k_ctx.shape[1]
    bias = attention_bias(seq.biases, q.dtype, lambda: mask.repeat(n_heads // n_kv, 1))  # row j * tokens + i: token i
    o = F.scaled_dot_product_attention(
        rows_per_kv_head(q[rows], n_kv)[None], k_ctx.transpose(0, 1)[None], v_ctx.transpose(0, 1)[None],
        attn_mask=bias, scale=scale,
    )
    return heads_from_rows(o[0], n_heads)


def paged_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache: LayerKVCache,
                    meta: AttentionMetadata, scale: float) -> torch.Tensor:
    """Attention of the packed new tokens over their paged contexts.

    ``q``: ``[num_tokens, n_heads, head_dim]``; ``k``, ``v``: ``[num_tokens, n_kv_heads, head_dim]``.
    Grouped-query attention (fewer K/V heads than query heads) is handled without repeating K/V.
    """
    cache.write(k, v, meta.slot_mapping)
    decode = meta.decode
    if decode is not None and decode.contiguous_from == 0 and decode.rows.shape[0] == q.shape[0]:
        return decode_attention(q, cache, decode, scale)  # a pure decode step: nothing to scatter
    out = torch.empty_like(q)
    if decode is not None:
        if decode.contiguous_from is not None:
            rows = slice(decode.contiguous_from, decode.contiguous_from + decode.rows.shape[0])
            out[rows] = decode_attention(q[rows], cache, decode, scale)
        else:
            out[decode.rows] = decode_attention(q[decode.rows], cache, decode, scale)
    for seq in meta.prefills:
        out[seq.query_start:seq.query_end] = prefill_attention(q, k, v, cache, seq, scale)
    return out
