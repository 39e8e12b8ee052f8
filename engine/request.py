"""A request as the scheduler and the KV cache manager see it.

It owns its token ids (prompt + generated) and its chain of block hashes. The hashes
are computed by the cache manager's :class:`~engine.hashing.BlockHasher`, attached the
first time the manager sees the request, and extended as generated tokens fill blocks.
They survive preemption, so a resumed request can look itself up again for free.
"""

from __future__ import annotations

import enum
import math
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from engine.errors import InvalidRequestError

if TYPE_CHECKING:
    from engine.hashing import BlockHash, BlockHasher


@dataclass
class SamplingParams:
    """How to pick output tokens. ``temperature == 0`` means greedy."""

    max_tokens: int = 16
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0  # 0 = no top-k cut
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    ignore_eos: bool = False
    #: Log-probabilities of this many top tokens at every prompt position. Such a request
    #: needs logits for every prompt token, so it never reads the prefix cache (it still writes it).
    prompt_logprobs: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.max_tokens, int) or isinstance(self.max_tokens, bool) or self.max_tokens <= 0:
            raise InvalidRequestError(f"max_tokens must be a positive integer, got {self.max_tokens!r}.")
        if not math.isfinite(self.temperature) or self.temperature < 0:  # nan < 0 is False
            raise InvalidRequestError(f"temperature must be a finite number >= 0, got {self.temperature}.")
        if not 0 < self.top_p <= 1:
            raise InvalidRequestError(f"top_p must be in (0, 1], got {self.top_p}.")
        if self.top_k < 0:
            raise InvalidRequestError(f"top_k must be >= 0 (0 disables it), got {self.top_k}.")
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        if self.prompt_logprobs is not None and (
            isinstance(self.prompt_logprobs, bool) or not isinstance(self.prompt_logprobs, int) or self.prompt_logprobs < 0
        ):
            raise InvalidRequestError(f"prompt_logprobs must be a non-negative integer, got {self.prompt_logprobs!r}.")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


class RequestStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    PREEMPTED = "preempted"
    FINISHED_STOPPED = "finished (stop)"
    FINISHED_LENGTH = "finished (length)"
    FINISHED_ABORTED = "finished (aborted)"

    @property
    def is_finished(self) -> bool:
        return self.name.startswith("FINISHED")


def validate_token_ids(token_ids: object, what: str = "prompt") -> list[int]:
    """Return ``token_ids`` as a list of non-negative ints, or raise a clear error."""
    if isinstance(token_ids, (str, bytes)):
        raise InvalidRequestError(f"The {what} must be a list of token ids, not a string.")
    try:
        ids = list(token_ids)  # type: ignore[call-overload]
    except TypeError:
        raise InvalidRequestError(f"The {what} must be a list of token ids, got {type(token_ids).__name__}.") from None
    if not ids:
        raise InvalidRequestError(f"The {what} is empty: a request needs at least one token.")
    for position, token in enumerate(ids):
        if isinstance(token, bool) or not isinstance(token, int):
            raise InvalidRequestError(
                f"Token {position} of the {what} is {token!r}; token ids must be integers."
            )
        if token < 0:
            raise InvalidRequestError(f"Token {position} of the {what} is {token}; token ids cannot be negative.")
    return [int(t) for t in ids]


class Request:
    """One generation request: prompt, outputs so far, progress and block hashes."""

    def __init__(
        self,
        request_id: str,
        prompt_token_ids: list[int],
        sampling_params: SamplingParams | None = None,
        *,
        lora_name: str | None = None,
        lora_path: str | None = None,
        lora_id: int | None = None,
        cache_salt: str | None = None,
        prompt_logprobs: int | None = None,
        arrival_time: float | None = None,
    ) -> None:
        """``prompt_logprobs`` here is a shortcut for ``SamplingParams.prompt_logprobs``.
        ``lora_id`` is the adapter's integer id (vLLM's ``lora_int_id``), published in KV events."""
        if not isinstance(request_id, str) or not request_id:
            raise InvalidRequestError(f"request_id must be a non-empty string, got {request_id!r}.")
        self.request_id = request_id
        self.prompt_token_ids: list[int] = validate_token_ids(prompt_token_ids)
        self.sampling_params = sampling_params or SamplingParams()
        self.lora_name = lora_name
        self.lora_path = lora_path
        self.lora_id = lora_id
        self.cache_salt = cache_salt
        if prompt_logprobs is not None:
            self.sampling_params = replace(self.sampling_params, prompt_logprobs=prompt_logprobs)
        self.arrival_time = time.monotonic() if arrival_time is None else arrival_time

        self.status = RequestStatus.WAITING
        self.output_token_ids: list[int] = []
        self._all_token_ids: list[int] = list(self.prompt_token_ids)
        #: Tokens whose K/V are in the cache (hit or computed). Reset to 0 on preemption.
        self.num_computed_tokens = 0
        #: Prompt tokens served from the prefix cache on first admission (-1 = not admitted yet).
        self.num_cached_tokens = -1
        self.num_preemptions = 0
        self.block_hashes: list[BlockHash] = []
        self._hasher: BlockHasher | None = None
        self._hash_block_size = 0

    # -- tokens -------------------------------------------------------------------------
    @property
    def all_token_ids(self) -> list[int]:
        return self._all_token_ids

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.output_token_ids)

    @property
    def num_tokens(self) -> int:
        return len(self._all_token_ids)

    @property
    def is_finished(self) -> bool:
        return self.status.is_finished

    @property
    def prompt_logprobs(self) -> int | None:
        return self.sampling_params.prompt_logprobs

    @property
    def skip_reading_prefix_cache(self) -> bool:
        """Prompt-logprob requests need logits for every prompt token, so they cannot skip any."""
        return self.sampling_params.prompt_logprobs is not None

    def append_output_token_ids(self, token_ids: int | list[int]) -> None:
        """Record generated tokens and hash any block they complete."""
        ids = [token_ids] if isinstance(token_ids, int) else list(token_ids)
        validate_token_ids(ids, what="output")
        self.output_token_ids.extend(ids)
        self._all_token_ids.extend(ids)
        self._update_block_hashes()

    # -- hashing --------------------------------------------------------------------------
    def attach_hasher(self, hasher: BlockHasher, block_size: int) -> None:
        """Give the request the hasher of the cache that serves it (idempotent)."""
        if self._hasher is hasher and self._hash_block_size == block_size:
            return
        if self._hasher is not None:
            raise InvalidRequestError(
                f"Request {self.request_id!r} is already hashed by another cache; "
                "build a new Request for each engine."
            )
        self._hasher = hasher
        self._hash_block_size = block_size
        self._update_block_hashes()

    def _update_block_hashes(self) -> None:
        if self._hasher is None:
            return
        self._hasher.extend_block_hashes(
            self.block_hashes, self._all_token_ids, self._hash_block_size,
            lora_name=self.lora_name, lora_path=self.lora_path, cache_salt=self.cache_salt,
        )

    def __repr__(self) -> str:
        return (
            f"Request({self.request_id!r}, tokens={self.num_tokens}, "
            f"computed={self.num_computed_tokens}, status={self.status.name})"
        )
