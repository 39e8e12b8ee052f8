"""The ``Backend`` protocol: what ``LLMEngine`` needs from whatever runs a scheduled batch.

Two back ends implement it: :class:`engine.simulator.SimulatorBackend` (no model, instant) and
:class:`engine.model.runner.ModelBackend` (a real model over paged KV tensors). The engine talks
to both through these names only, so the scheduler and the cache never know which one runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from engine.scheduler import SchedulerOutput


class Backend(Protocol):
    # Read-only properties, so a plain attribute of a narrower type (``int``, ``None``) satisfies them.
    @property
    def tokenizer(self) -> Any:
        """Turns text into token ids (``encode``/``decode``); ``None`` when the back end only takes ids."""
        ...

    @property
    def vocab_size(self) -> int | None:
        """Token ids must be below this; ``None`` when any id goes."""
        ...

    @property
    def max_model_len(self) -> int | None:
        """The longest prompt plus output the model can attend over; ``None`` when unlimited."""
        ...

    @property
    def eos_token_ids(self) -> set[int]:
        """Sampling one of these finishes a request (unless it asked to ignore EOS)."""
        ...

    def preferred_num_blocks(self) -> int | None:
        """How many KV blocks this back end would like when the config does not say (``None``: no opinion)."""
        ...

    def allocate_kv_cache(self, num_blocks: int, block_size: int) -> None:
        """Make room for the engine's KV pages (once: the pages belong to one engine)."""
        ...

    def execute(self, output: SchedulerOutput) -> dict[str, int]:
        """Run one scheduled step; return the token sampled for each request that produced one."""
        ...

    def apply_chat_template(self, messages: list[dict[str, str]]) -> list[int]:
        """Chat messages as token ids, through the model's template (raise when there is none)."""
        ...

    def set_script(self, request_id: str, token_ids: list[int]) -> None:
        """Make a request generate exactly these tokens (raise when the back end cannot)."""
        ...

    def forget(self, request_id: str) -> None:
        """Drop whatever per-request state the back end keeps (the request is gone)."""
        ...
