"""Which vLLM the cache reproduces: every rule that differs between versions, in one place.

``EngineConfig(vllm_version="0.33")`` picks one :class:`VllmVersion`; the hasher, the block
pool, the cache manager and the KV events read their rules from it and nowhere else. Each
rule is a fact of vLLM's own code (``vllm/v1/core/block_pool.py``, ``kv_cache_manager.py``,
``kv_cache_utils.py``, ``sched/scheduler.py``, ``distributed/kv_events.py``) at that
release, checked by replaying random traces on the real wheels (``tests/vllm/``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from engine.errors import ConfigError

#: How ``BlockPool.free_blocks`` orders freed blocks: ``"vllm"`` (>= 0.24) sends blocks
#: without a hash to the head and hashed ones to the tail; ``"classic"`` appends them all.
FREE_POLICIES = ("vllm", "classic")
#: The two free rules as the app names them: which versions follow each, and what the rule does.
#: One name per rule everywhere (pages, lessons, player, charts): the release the app's engine plays it as.
FREE_POLICY_VERSIONS: dict[str, str] = {"vllm": "vLLM 0.33", "classic": "vLLM 0.23 (classic)"}
FREE_POLICY_NOTES: dict[str, str] = {
    "vllm": "hashless blocks → head, hashed → tail",
    "classic": "every freed block → tail",
}

#: When prefix-cache stats count a request: at each lookup, or once it is admitted.
STATS_AT_LOOKUP = "lookup"
STATS_AT_ADMISSION = "admission"


@dataclass(frozen=True)
class VllmVersion:
    """The rules of one vLLM release, each with a one-line reason (``why[rule]``)."""

    name: str  # what EngineConfig.vllm_version takes
    wheel: str  # the release the differential tests run against
    label: str
    summary: str  # what changed from the previous version listed
    free_policy: str  # one of FREE_POLICIES
    watermark: bool  # whether KVCacheManager has a watermark at all
    stats_counted_at: str  # STATS_AT_LOOKUP or STATS_AT_ADMISSION
    tagged_extra_keys: bool  # ("lora", name, path) / ("cache_salt", s) instead of bare values
    fixed_default_seed: bool  # NONE_HASH from "vllm-none-hash" (sha256) instead of os.urandom
    array_like_events: bool  # KV events encoded as msgpack arrays instead of maps
    sliding_window_groups: bool = False  # hybrid KV cache groups (sliding window + full) reproduced
    why: Mapping[str, str] = field(default_factory=dict)

    def rules(self) -> list[tuple[str, str, str]]:
        """``(rule, value, why)`` rows, for a table in the app or a lesson."""
        values = {
            "free_policy": self.free_policy,
            "watermark": "yes" if self.watermark else "none",
            "stats_counted_at": self.stats_counted_at,
            "tagged_extra_keys": "tagged" if self.tagged_extra_keys else "plain",
            "fixed_default_seed": "fixed" if self.fixed_default_seed else "random",
            "array_like_events": "arrays" if self.array_like_events else "maps",
            "sliding_window_groups": "reproduced" if self.sliding_window_groups else "refused",
        }
        return [(rule, value, self.why[rule]) for rule, value in values.items()]


#: Reasons shared by several versions (the rule did not change between them).
_WHY_PLAIN_EXTRA_KEYS = "The LoRA name and the cache salt go into the hash as bare strings."
_WHY_RANDOM_SEED = "NONE_HASH is os.urandom(32) unless PYTHONHASHSEED is set, so hashes differ per process."
_WHY_NO_WINDOWS = (
    "vLLM has hybrid KV cache groups at this release too, but PrefixLab has not checked its sliding-window "
    "and coordinator rules against this wheel, so a layer pattern with a window is refused."
)
_WHY_WATERMARK = "int(watermark * num_blocks) blocks stay free when admitting a waiting/preempted request, but only while some request is already running."


_V023 = VllmVersion(
    name="0.23",
    wheel="0.23.0",
    label="vLLM 0.23 (classic LRU)",
    summary="Every freed block goes to the tail of the free queue; no watermark.",
    free_policy="classic",
    watermark=False,
    stats_counted_at=STATS_AT_LOOKUP,
    tagged_extra_keys=False,
    fixed_default_seed=False,
    array_like_events=True,
    why={
        "free_policy": "free_blocks appends every block reaching ref 0: pure LRU, even for blocks that can never be hit.",
        "watermark": "KVCacheManager has no watermark: a waiting request may take the last free block.",
        "stats_counted_at": "get_computed_blocks records a query on every lookup (skipped when caching is off or the request skips the cache).",
        "tagged_extra_keys": _WHY_PLAIN_EXTRA_KEYS,
        "fixed_default_seed": _WHY_RANDOM_SEED,
        "array_like_events": "KVCacheEvent is an array_like msgspec struct: events travel as msgpack arrays.",
        "sliding_window_groups": _WHY_NO_WINDOWS,
    },
)

_V025 = VllmVersion(
    name="0.25",
    wheel="0.25.1",
    label="vLLM 0.25 (hashless blocks first)",
    summary="Freed blocks without a hash go to the head (reused first); a watermark keeps blocks free for running requests.",
    free_policy="vllm",
    watermark=True,
    stats_counted_at=STATS_AT_LOOKUP,
    tagged_extra_keys=False,
    fixed_default_seed=False,
    array_like_events=False,
    why={
        "free_policy": "A block without a hash can never be hit, so free_blocks prepends it (reuse it first) and appends hashed ones (LRU); with caching off every block is hashless.",
        "watermark": _WHY_WATERMARK,
        "stats_counted_at": "get_computed_blocks records a query on every lookup, so a request that waits several steps is counted several times.",
        "tagged_extra_keys": _WHY_PLAIN_EXTRA_KEYS,
        "fixed_default_seed": _WHY_RANDOM_SEED,
        "array_like_events": "KV events are msgpack maps (field names included), so new fields can be added.",
        "sliding_window_groups": _WHY_NO_WINDOWS,
    },
)

_V033 = VllmVersion(
    name="0.33",
    wheel="0.33.0",
    label="vLLM 0.33 (current)",
    summary="Tagged extra keys with the LoRA path, a fixed sha256 seed, and stats counted once per admitted request.",
    free_policy="vllm",
    watermark=True,
    stats_counted_at=STATS_AT_ADMISSION,
    tagged_extra_keys=True,
    fixed_default_seed=True,
    array_like_events=False,
    sliding_window_groups=True,
    why={
        "free_policy": "free_blocks prepends blocks without a hash (or every block when caching is off) and appends hashed ones.",
        "watermark": _WHY_WATERMARK,
        "stats_counted_at": "The scheduler records the lookup once the request is admitted, so a lookup that could not be scheduled is not counted.",
        "tagged_extra_keys": "Extra keys say where they come from, ('lora', name, path) and ('cache_salt', salt): re-pointing a LoRA name at another adapter no longer reuses its KV.",
        "fixed_default_seed": "sha256 cannot be steered into collisions, so NONE_HASH comes from the fixed seed 'vllm-none-hash' and hashes match across processes; xxhash keeps a secret random seed.",
        "array_like_events": "KV events are msgpack maps; BlockStored still publishes the extra keys untagged.",
        "sliding_window_groups": (
            "Several KV cache groups over one pool, keyed (block hash, group): a sliding-window group releases "
            "blocks that leave its window and needs only the window cached for a hit; the hybrid coordinator "
            "agrees on one hit length for all groups (checked against the 0.33.0 wheel)."
        ),
    },
)

#: Every reproduced version, oldest first.
VLLM_VERSIONS: dict[str, VllmVersion] = {v.name: v for v in (_V023, _V025, _V033)}
DEFAULT_VLLM_VERSION = "0.33"
#: Older spellings of a version, named after its free rule: URLs (``policy=classic``), ``--policy``
#: and lesson files (``policies: [vllm, classic]``) written before ``vllm_version`` was the one knob.
LEGACY_VERSION_NAMES: dict[str, str] = {"vllm": DEFAULT_VLLM_VERSION, "classic": "0.23"}


def resolve_vllm_version(name: str) -> str:
    """``name`` as a release ("0.33", "0.25", "0.23"); the older spellings "vllm" and "classic" read too."""
    return LEGACY_VERSION_NAMES.get(str(name), str(name))


def get_vllm_version(name: str) -> VllmVersion:
    """The rules of ``name`` ("0.33", "0.25" or "0.23"; "vllm" and "classic" as older names), or a clear error."""
    version = VLLM_VERSIONS.get(resolve_vllm_version(name))
    if version is None:
        raise ConfigError(f"Unknown vllm_version {name!r}; choose one of {list(VLLM_VERSIONS)}.")
    return version


def version_choices() -> list[tuple[str, str, str]]:
    """``(name, label, summary)`` for each version, oldest first (for a selector or a legend)."""
    return [(v.name, v.label, v.summary) for v in VLLM_VERSIONS.values()]


def require_sliding_window_rules(vllm_version: str) -> None:
    """A clear error for versions whose sliding-window rules PrefixLab does not reproduce."""
    version = get_vllm_version(vllm_version)
    if not version.sliding_window_groups:
        raise ConfigError(
            f"Sliding-window (hybrid) KV cache groups follow vLLM 0.33's rules only; "
            f"{version.label} is not reproduced for them. Use vllm_version='0.33' or a layer pattern "
            f"of full attention only. ({version.why['sliding_window_groups']})"
        )
