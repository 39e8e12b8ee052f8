"""The simulator back end: the real scheduler and cache, no model.

Output tokens come from a script (for lessons: "Req0 decodes P") or from a seeded
generator that depends only on (seed, request id, output position), so a preempted and
recomputed request produces the same tokens again, exactly like greedy decoding would.
Thousands of requests run in well under a second, which is what the lab needs.
"""

from __future__ import annotations

import hashlib
import re

from engine.errors import InvalidRequestError
from engine.scheduler import SchedulerOutput


class WordTokenizer:
    """Whitespace tokenizer with a vocabulary that grows as it sees words.

    Lets a lesson write prompts as words ("A B C D") and see the same ids every time
    within one engine.
    """

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self.words: list[str] = []

    def encode(self, text: str) -> list[int]:
        ids = []
        for word in re.findall(r"\S+", text):
            if word not in self.vocab:
                self.vocab[word] = len(self.words)
                self.words.append(word)
            ids.append(self.vocab[word])
        return ids

    def token_text(self, token_id: int) -> str:
        return self.words[token_id] if 0 <= token_id < len(self.words) else f"t{token_id}"

    def decode(self, token_ids: list[int]) -> str:
        return " ".join(self.token_text(t) for t in token_ids)


class SimulatorBackend:
    """Stands in for a model runner: returns one token per request that finished its prefill."""

    vocab_size = 50_000
    max_model_len = None
    eos_token_ids: set[int] = set()

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.tokenizer = WordTokenizer()
        self.scripts: dict[str, list[int]] = {}

    def preferred_num_blocks(self) -> int | None:
        return None  # no memory to size: the engine's config (or its default) decides

    def allocate_kv_cache(self, num_blocks: int, block_size: int) -> None:
        """Nothing to allocate: the simulator keeps no K/V, only the cache's bookkeeping."""

    def apply_chat_template(self, messages: list[dict[str, str]]) -> list[int]:
        raise InvalidRequestError("The simulator has no chat template: pass text or token ids.")

    def set_script(self, request_id: str, token_ids: list[int]) -> None:
        """Make ``request_id`` generate exactly these tokens, in order."""
        self.scripts[request_id] = list(token_ids)

    def _generated_token(self, request_id: str, position: int) -> int:
        script = self.scripts.get(request_id)
        if script is not None and position < len(script):
            return script[position]
        digest = hashlib.blake2b(f"{self.seed}/{request_id}/{position}".encode(), digest_size=8).digest()
        return 1_000 + int.from_bytes(digest, "little") % (self.vocab_size - 1_000)

    def execute(self, output: SchedulerOutput) -> dict[str, int]:
        return {
            item.request_id: self._generated_token(item.request_id, item.request.num_output_tokens)
            for item in output.scheduled
            if item.samples_token
        }

    def forget(self, request_id: str) -> None:
        self.scripts.pop(request_id, None)
