"""What one scheduler step decided: which requests compute which tokens (vLLM's ``sched/output.py``).

Its own module because the model back ends and the offload tier read it without the scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.request import Request

if TYPE_CHECKING:
    from engine.kv_offload.base import TransferPlan


@dataclass
class ScheduledRequest:
    """One request's share of a step: compute tokens ``[num_computed_tokens, +num_new_tokens)``."""

    request: Request
    num_new_tokens: int
    num_computed_tokens: int  # tokens already in the KV cache before this step
    block_ids: list[int]

    @property
    def request_id(self) -> str:
        return self.request.request_id

    @property
    def token_ids(self) -> list[int]:
        """The tokens this step computes."""
        return self.request.all_token_ids[self.num_computed_tokens : self.num_computed_tokens + self.num_new_tokens]

    @property
    def samples_token(self) -> bool:
        """True when this chunk reaches the last known token, so its logits give the next token."""
        return self.num_computed_tokens + self.num_new_tokens == self.request.num_tokens


@dataclass
class SchedulerOutput:
    step: int
    scheduled: list[ScheduledRequest] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    kv_transfers: TransferPlan | None = None  # the offload tier's copies this step (tier on only)

    @property
    def num_batched_tokens(self) -> int:
        return sum(s.num_new_tokens for s in self.scheduled)

    @property
    def is_empty(self) -> bool:
        return not self.scheduled
