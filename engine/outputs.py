"""What the engine hands back for each request: tokens, text, and timing metrics."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RequestMetrics:
    """Per-request timings (seconds, ``time.perf_counter``) and token counts, measured by the engine.

    Where a request's time goes: ``queue_s`` (arrival -> first scheduled), ``prefill_compute_s``
    (model steps that ran its prompt tokens), ``scheduled_to_first_token_s`` (first scheduled ->
    first token: the prefill plus any steps it waited between chunks), then decoding at
    ``tokens_per_s``. ``ttft`` = ``queue_s`` + ``scheduled_to_first_token_s``.
    """

    arrival_time: float
    num_prompt_tokens: int
    num_cached_tokens: int = 0  # prompt tokens served from the prefix cache
    num_computed_prefill_tokens: int = 0  # prompt tokens actually run through the model
    first_scheduled_time: float | None = None
    first_token_time: float | None = None
    finished_time: float | None = None
    num_output_tokens: int = 0
    num_preemptions: int = 0
    prefill_compute_s: float = 0.0  # wall time of the model steps that computed its prompt tokens

    @property
    def ttft(self) -> float | None:
        """Time to first token, from arrival."""
        return None if self.first_token_time is None else self.first_token_time - self.arrival_time

    @property
    def queue_s(self) -> float | None:
        """Waiting before the scheduler first gave the request a slot in a batch."""
        return None if self.first_scheduled_time is None else self.first_scheduled_time - self.arrival_time

    @property
    def scheduled_to_first_token_s(self) -> float | None:
        """From the first scheduled step to the first token (TTFT without the queue)."""
        if self.first_token_time is None or self.first_scheduled_time is None:
            return None
        return self.first_token_time - self.first_scheduled_time

    @property
    def decode_time(self) -> float | None:
        if self.first_token_time is None or self.finished_time is None:
            return None
        return self.finished_time - self.first_token_time

    @property
    def tokens_per_s(self) -> float | None:
        """Decode speed after the first token (None until there are two tokens)."""
        decode = self.decode_time
        if not decode or self.num_output_tokens < 2:
            return None
        return (self.num_output_tokens - 1) / decode

    def as_dict(self) -> dict[str, float | int | None]:
        return {
            "prompt_tokens": self.num_prompt_tokens,
            "cached_tokens": self.num_cached_tokens,
            "computed_prefill_tokens": self.num_computed_prefill_tokens,
            "output_tokens": self.num_output_tokens,
            "preemptions": self.num_preemptions,
            "ttft_s": self.ttft,
            "queue_s": self.queue_s,
            "prefill_compute_s": self.prefill_compute_s if self.num_computed_prefill_tokens else None,
            "scheduled_to_first_token_s": self.scheduled_to_first_token_s,
            "decode_s": self.decode_time,
            "tokens_per_s": self.tokens_per_s,
        }


@dataclass
class RequestOutput:
    request_id: str
    prompt_token_ids: list[int]
    token_ids: list[int] = field(default_factory=list)
    text: str = ""
    finished: bool = False
    finish_reason: str | None = None
    num_cached_tokens: int = 0
    metrics: RequestMetrics | None = None
