"""KV cache specs and groups: which layers share a block table, and what each kind of layer keeps.

A model whose layers all use full attention has one KV cache group. A hybrid model (Gemma 2/3,
gpt-oss, Qwen with ``layer_types``) mixes full-attention layers with sliding-window layers; vLLM
then splits the layers into several groups of the same size, so one physical block (page) fits a
block of any group, and every group gets its own block table out of one shared pool.

The rule for forming groups is vLLM's (``_get_kv_cache_groups_uniform_page_size``): layers are
bucketed by spec in order of first appearance; the group size is the smallest bucket (or the
largest, when no bucket is 1.5 times the smallest); each bucket of ``n`` layers becomes
``ceil(n / group_size)`` groups, layer ``i`` of the bucket going to group ``i % num_groups``.
vLLM's extra step of merging full-attention specs that differ only in a window is not reproduced
(PrefixLab has no such layers).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.errors import ConfigError

FULL_ATTENTION = "full_attention"
SLIDING_WINDOW = "sliding_window"


@dataclass(frozen=True)
class FullAttentionSpec:
    """Every token attends to every earlier token: all of a request's blocks stay needed."""

    block_size: int

    @property
    def kind(self) -> str:
        return FULL_ATTENTION

    @property
    def sliding_window(self) -> int | None:
        return None


@dataclass(frozen=True)
class SlidingWindowSpec:
    """Each token attends to the last ``sliding_window`` tokens (itself included)."""

    block_size: int
    sliding_window: int

    @property
    def kind(self) -> str:
        return SLIDING_WINDOW


KVCacheSpec = FullAttentionSpec | SlidingWindowSpec


@dataclass(frozen=True)
class KVCacheGroupSpec:
    """Layers that share one block table (vLLM's ``KVCacheGroupSpec``)."""

    layer_names: tuple[str, ...]
    kv_cache_spec: KVCacheSpec


def parse_layer_pattern(pattern: str | Sequence[str]) -> list[int | None]:
    """The sliding window of each layer (``None`` = full attention), from a pattern.

    A pattern is a comma-separated list of ``full`` or ``sliding:W`` (``W`` tokens), each
    optionally repeated with ``*N``: ``"sliding:512*5,full"`` is Gemma-3-like (five
    sliding-window layers to one full layer). Repeating the whole pattern gives the same groups,
    so one period is enough.
    """
    entries = pattern.split(",") if isinstance(pattern, str) else list(pattern)
    windows: list[int | None] = []
    for raw in entries:
        entry = raw.strip()
        if not entry:
            continue
        name, _, count_text = entry.partition("*")
        try:
            count = int(count_text) if count_text else 1
        except ValueError:
            raise ConfigError(f"Layer pattern entry {entry!r}: the repeat after '*' must be an integer.") from None
        if count < 1:
            raise ConfigError(f"Layer pattern entry {entry!r}: the repeat must be at least 1.")
        kind, _, window_text = name.strip().partition(":")
        kind = kind.strip().lower()
        if kind in ("full", FULL_ATTENTION) and not window_text:
            windows.extend([None] * count)
        elif kind in ("sliding", "sliding_window", "swa"):
            try:
                window = int(window_text)
            except ValueError:
                raise ConfigError(f"Layer pattern entry {entry!r}: write the window as sliding:W, W in tokens.") from None
            if window < 1:
                raise ConfigError(f"Layer pattern entry {entry!r}: the window must be at least 1 token.")
            windows.extend([window] * count)
        else:
            raise ConfigError(f"Layer pattern entry {entry!r}: use 'full' or 'sliding:W', optionally with '*N'.")
    if not windows:
        raise ConfigError("The layer pattern names no layer.")
    return windows


def spec_for_window(window: int | None, block_size: int) -> KVCacheSpec:
    return FullAttentionSpec(block_size) if window is None else SlidingWindowSpec(block_size, window)


def kv_cache_groups_for_layers(windows: Sequence[int | None], block_size: int) -> list[KVCacheGroupSpec]:
    """vLLM's grouping of layers with one page size (see the module docstring)."""
    buckets: dict[KVCacheSpec, list[str]] = {}
    for index, window in enumerate(windows):
        buckets.setdefault(spec_for_window(window, block_size), []).append(f"layer.{index}")
    if len(buckets) == 1:
        spec, names = next(iter(buckets.items()))
        return [KVCacheGroupSpec(tuple(names), spec)]
    sizes = [len(names) for names in buckets.values()]
    group_size = min(sizes)
    if max(sizes) < group_size * 1.5:
        group_size = max(sizes)
    groups: list[KVCacheGroupSpec] = []
    for spec, names in buckets.items():
        num_groups = math.ceil(len(names) / group_size)
        groups.extend(KVCacheGroupSpec(tuple(names[i::num_groups]), spec) for i in range(num_groups))
    return groups


def layer_pattern_from_hf_config(config: Mapping[str, Any] | Any) -> list[int | None] | None:
    """The per-layer windows a transformers config declares, or ``None`` when it has no window.

    Qwen2/Qwen3 style: ``layer_types`` (``"sliding_attention"`` / ``"full_attention"``) with
    ``sliding_window``, or ``use_sliding_window`` with ``max_window_layers`` (layers from that
    index on use the window). Mistral style: ``sliding_window`` alone (every layer). A window of
    ``None`` or ``use_sliding_window: false`` means full attention everywhere.
    """
    get = config.get if isinstance(config, Mapping) else (lambda key, default=None: getattr(config, key, default))
    window = get("sliding_window")
    num_layers = int(get("num_hidden_layers") or 0)
    if not window or num_layers < 1:
        return None
    layer_types = get("layer_types")
    if layer_types:
        return [int(window) if kind == "sliding_attention" else None for kind in layer_types]
    use = get("use_sliding_window")
    if use is False:
        return None
    max_window_layers = get("max_window_layers")
    if use is True and max_window_layers is not None:
        first = int(max_window_layers)
        return [int(window) if i >= first else None for i in range(num_layers)]
    if use is None:  # Mistral: no switch, the window applies to every layer
        return [int(window)] * num_layers
    return [int(window)] * num_layers
