"""Block hashing: how a run of tokens becomes a key in the prefix cache.

Only *full* blocks are hashed. Block ``i`` covers tokens ``[i*bs, (i+1)*bs)`` and its
hash covers ``(parent_hash, tokens, extra_keys)``: because the parent is itself a hash of
everything before it, one block hash stands for the *whole prefix* up to that block.

The digests are byte-identical to vLLM's (same tuple, same serialisation, same digest),
so a hash printed here can be compared with one printed by vLLM.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import cbor2
import xxhash

from engine.errors import ConfigError
from engine.vllm_versions import DEFAULT_VLLM_VERSION, VllmVersion, get_vllm_version

BlockHash = bytes

#: The fixed seed sha256 variants use when the user gives none (vLLM's convention).
DEFAULT_SHA256_SEED = "vllm-none-hash"


def _sha256_pickle(obj: Any) -> bytes:
    return hashlib.sha256(pickle.dumps(obj, protocol=5)).digest()


def _sha256_cbor(obj: Any) -> bytes:
    return hashlib.sha256(cbor2.dumps(obj, canonical=True)).digest()


def _xxhash_pickle(obj: Any) -> bytes:
    return xxhash.xxh3_128_digest(pickle.dumps(obj, protocol=5))


def _xxhash_cbor(obj: Any) -> bytes:
    return xxhash.xxh3_128_digest(cbor2.dumps(obj, canonical=True))


#: ``prefix_caching_hash_algo`` name -> function from a Python object to its digest.
HASH_FUNCTIONS: dict[str, Callable[[Any], bytes]] = {
    "sha256": _sha256_pickle,
    "sha256_cbor": _sha256_cbor,
    "xxhash": _xxhash_pickle,
    "xxhash_cbor": _xxhash_cbor,
}


def resolve_seed(algo: str, seed: str | None, vllm_version: str = DEFAULT_VLLM_VERSION) -> tuple[str | None, str]:
    """Pick the seed of ``NONE_HASH`` and say why, so the UI can explain it.

    A user-given seed wins, then ``PYTHONHASHSEED``. Otherwise, from vLLM 0.33 on, sha256
    variants use a fixed public seed (hashes are reproducible across processes, and a
    cryptographic hash cannot be steered into collisions anyway), while xxhash variants use
    a random per-process seed: xxhash is not collision resistant, so a tenant who knows the
    seed could craft prompts whose blocks collide with another tenant's. Up to 0.25 there is
    no seed at all (``None``): ``NONE_HASH`` itself is 32 random bytes.
    """
    if seed is not None:
        return str(seed), "given by the user"
    env_seed = os.environ.get("PYTHONHASHSEED")
    if env_seed is not None:
        return env_seed, "taken from PYTHONHASHSEED"
    if not get_vllm_version(vllm_version).fixed_default_seed:
        return None, f"none: vLLM {vllm_version} makes NONE_HASH 32 random bytes per process (set PYTHONHASHSEED to share it)"
    if algo.startswith("sha256"):
        return DEFAULT_SHA256_SEED, "fixed default for sha256 (deterministic across processes)"
    return os.urandom(32).hex(), "random per process: xxhash is not collision resistant, so its seed must stay secret"


def block_extra_keys(
    block_index: int,
    *,
    lora_name: str | None = None,
    lora_path: str | None = None,
    cache_salt: str | None = None,
    tagged: bool = True,
) -> tuple | None:
    """The extra keys that go into one block's hash (``None`` when there are none).

    LoRA is on every block (the same tokens give different K/V under another adapter);
    the cache salt is on the first block only, and the hash chain carries it onward.
    ``tagged`` (vLLM >= 0.33) writes ``("lora", name, path)`` and ``("cache_salt", salt)``;
    older versions put the bare name and salt in the tuple.
    """
    keys: list[Any] = []
    if lora_name:
        keys.append(("lora", lora_name, lora_path) if tagged else lora_name)
    if cache_salt and block_index == 0:
        keys.append(("cache_salt", cache_salt) if tagged else cache_salt)
    return tuple(keys) if keys else None


def event_extra_keys(extra_keys: tuple | None) -> tuple | None:
    """The extra keys as KV events publish them: untagged in every version (0.33 drops its tags)."""
    if extra_keys is None:
        return None
    return tuple(key[1] if isinstance(key, tuple) else key for key in extra_keys)


#: KV events publish a block hash as the low 64 bits of its digest, read big-endian
#: (vLLM's ``maybe_convert_block_hash``, on by default via VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES).
EXTERNAL_HASH_MASK = (1 << 64) - 1


def external_block_hash(block_hash: BlockHash) -> int:
    """A block hash in the form vLLM's KV events carry it: a 64-bit int."""
    return int.from_bytes(block_hash, byteorder="big") & EXTERNAL_HASH_MASK


@dataclass
class BlockHasher:
    """One hashing configuration: algorithm + seed + vLLM version, and so one ``NONE_HASH``.

    State lives on the instance, never in a module global, so two engines with
    different algorithms or seeds can run side by side in one process.
    """

    algo: str = "sha256"
    seed: str | None = None
    vllm_version: str = DEFAULT_VLLM_VERSION
    seed_reason: str = field(init=False)
    none_hash: BlockHash = field(init=False)

    def __post_init__(self) -> None:
        if self.algo not in HASH_FUNCTIONS:
            raise ConfigError(
                f"Unknown hash algorithm {self.algo!r}; choose one of {sorted(HASH_FUNCTIONS)}."
            )
        self.version: VllmVersion = get_vllm_version(self.vllm_version)
        self._hash_fn = HASH_FUNCTIONS[self.algo]
        self.seed, self.seed_reason = resolve_seed(self.algo, self.seed, self.vllm_version)
        # Up to vLLM 0.25 an unseeded NONE_HASH is raw random bytes, not a digest.
        self.none_hash = os.urandom(32) if self.seed is None else self._hash_fn(self.seed)

    @property
    def digest_size(self) -> int:
        return len(self._hash_fn(None))

    def extra_keys(
        self, block_index: int, *, lora_name: str | None = None, lora_path: str | None = None,
        cache_salt: str | None = None,
    ) -> tuple | None:
        """:func:`block_extra_keys` in this version's form."""
        return block_extra_keys(
            block_index, lora_name=lora_name, lora_path=lora_path, cache_salt=cache_salt,
            tagged=self.version.tagged_extra_keys,
        )

    def hash_block(
        self, parent: BlockHash | None, token_ids: Sequence[int], extra_keys: tuple | None = None
    ) -> BlockHash:
        """Hash one full block: ``(parent or NONE_HASH, tuple(tokens), extra_keys)``."""
        parent_hash = parent if parent else self.none_hash
        return self._hash_fn((parent_hash, tuple(token_ids), extra_keys))

    def extend_block_hashes(
        self,
        block_hashes: list[BlockHash],
        token_ids: Sequence[int],
        block_size: int,
        *,
        lora_name: str | None = None,
        lora_path: str | None = None,
        cache_salt: str | None = None,
    ) -> list[BlockHash]:
        """Append the hashes of every newly *full* block of ``token_ids`` to ``block_hashes``.

        Returns only the new hashes. Already hashed blocks are never re-hashed, so calling
        this after each decoded token costs one hash per completed block.
        """
        new_hashes: list[BlockHash] = []
        for index in range(len(block_hashes), len(token_ids) // block_size):
            parent = block_hashes[-1] if block_hashes else None
            extra = self.extra_keys(index, lora_name=lora_name, lora_path=lora_path, cache_salt=cache_salt)
            block_hash = self.hash_block(
                parent, token_ids[index * block_size : (index + 1) * block_size], extra
            )
            block_hashes.append(block_hash)
            new_hashes.append(block_hash)
        return new_hashes

    def hash_request(
        self,
        token_ids: Sequence[int],
        block_size: int,
        *,
        lora_name: str | None = None,
        lora_path: str | None = None,
        cache_salt: str | None = None,
    ) -> list[BlockHash]:
        """The chained hashes of every full block of a token sequence."""
        if block_size < 1:
            raise ConfigError(f"block_size must be at least 1, got {block_size}.")
        hashes: list[BlockHash] = []
        self.extend_block_hashes(
            hashes, token_ids, block_size,
            lora_name=lora_name, lora_path=lora_path, cache_salt=cache_salt,
        )
        return hashes


#: How many hex digits every label shows of a hash (the app's one hash length; viz.theme uses it).
SHORT_HASH_CHARS = 8


def short_hash(block_hash: BlockHash | int | None, n: int = SHORT_HASH_CHARS) -> str:
    """First ``n`` hex digits of a hash, for labels (``"-"`` for no hash).

    An ``int`` is a hash as KV events publish it (64 bits, :func:`external_block_hash`).
    """
    if block_hash is None:
        return "-"
    if isinstance(block_hash, int):
        return f"{block_hash & EXTERNAL_HASH_MASK:016x}"[:n]
    return block_hash.hex()[:n]
