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
    #: Seconds of model forward passes that computed this request's prompt tokens (the prefill
    #: proper). Shared steps count whole: exact when the request runs alone, as TTFT measuring does.
    prefill_time: float = 0.0

    @property
    def ttft(self) -> float | None:
        """Time to first token, from arrival (includes any wait before the engine schedules it)."""
        return None if self.first_token_time is None else self.first_token_time - self.arrival_time

    @property
    def queue_time(self) -> float | None:
        """From arrival to the first time the scheduler picked the request."""
        return None if self.first_scheduled_time is None else self.first_scheduled_time - self.arrival_time

    @property
    def scheduled_ttft(self) -> float | None:
        """Time to first token as the engine measures it: from first scheduling to the first token.

        This leaves out time before the engine ran (a web page redrawing, a queue), so it shows
        what the prefix cache changes: the prefill work.
        """
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
            "queue_s": self.queue_time,
            "scheduled_ttft_s": self.scheduled_ttft,
            "prefill_s": self.prefill_time if self.first_token_time is not None else None,
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
