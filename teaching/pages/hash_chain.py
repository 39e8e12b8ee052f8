"""The Hash chain page's state without Streamlit: two requests' inputs, the probe's result, and what it means.

The page keeps one :class:`HashChainPage` in session state, puts its widgets' values in its
fields, calls :meth:`HashChainPage.run` (r1 runs on a simulator, r2 is hashed and looked up by
the engine) and draws :attr:`~HashChainPage.result` with :meth:`~HashChainPage.notes`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from engine.errors import PrefixLabError
from engine.hashing import BlockHasher
from teaching.pages.prefix_probe import ProbeResult, RequestSpec, changed_blocks, parse_token_ids, replace_token
from teaching.pages.real_tokens import REAL, REAL_CHAT, WORDS, probe_with_tokenizer
from teaching.scenarios.describe import describe_extra_keys

TOKEN_IDS = "token ids"
MODES = (WORDS, TOKEN_IDS, REAL, REAL_CHAT)  # how the prompts are read
EDIT, OTHER = "r1 with one token edited", "another prompt"  # what r2 is
DEFAULT_PROMPT = "system : you are a helpful tutor . user : my dog ate my homework , what should I do now ?"
DEFAULT_IDS = "1 2 3 4 5 6 7 8 9 10 11 12 13 14"


def default_prompt(mode: str) -> str:
    return DEFAULT_IDS if mode == TOKEN_IDS else DEFAULT_PROMPT


def default_new_token(mode: str) -> str:
    return "cat" if mode == WORDS else "99"


@dataclass
class HashChainPage:
    """r1 and r2 as the student set them, the seed kept per hash algorithm, and the last probe."""

    algo: str = "sha256"
    seed_text: str = ""  # blank: the algorithm's default seed
    block_size: int = 4
    mode: str = WORDS
    prompt: str = DEFAULT_PROMPT  # r1
    how: str = EDIT
    edit_pos: int = 11
    edit_new: str = "cat"
    prompt2: str = DEFAULT_PROMPT  # r2 when it is another prompt
    r1_salt: str = ""
    r1_lora: str = ""
    r2_salt: str = ""
    r2_lora: str = ""
    default_seeds: dict[str, tuple[str | None, str]] = field(default_factory=dict)  # algo -> (seed, why)
    result: ProbeResult | None = None
    error: str | None = None

    @property
    def real(self) -> bool:
        """The prompts go through SmolLM2's tokenizer (r2 is then always another prompt)."""
        return self.mode in (REAL, REAL_CHAT)

    @property
    def edited(self) -> bool:
        return self.how == EDIT and not self.real

    def seed(self) -> tuple[str | None, str]:
        """The seed and why. xxhash picks a random seed per process; re-rolling it on every widget
        change would make the hashes jump under the student's eyes, so one is kept until :meth:`new_seed`."""
        if self.seed_text.strip():
            return self.seed_text.strip(), "given by you"
        if self.algo not in self.default_seeds:
            hasher = BlockHasher(self.algo)
            self.default_seeds[self.algo] = (hasher.seed, hasher.seed_reason)
        return self.default_seeds[self.algo]

    def new_seed(self) -> None:
        """Forget the algorithm's kept seed, like restarting vLLM."""
        self.default_seeds.pop(self.algo, None)

    def _read(self, text: str, label: str) -> str | list[int]:
        """Words pass through; token ids are parsed, with the request named in any error."""
        if self.mode != TOKEN_IDS:
            return text
        try:
            return parse_token_ids(text)
        except PrefixLabError as err:
            raise type(err)(f"{label}: {err}") from None

    def run(self) -> ProbeResult | None:
        """r1 runs, r2 is hashed and looked up; the result, or None with :attr:`error` in the engine's words."""
        self.result, self.error = None, None
        try:
            prompt1 = self._read(self.prompt, "r1")
            if self.edited:
                new_token = self.edit_new if self.mode == WORDS else self._read(self.edit_new, "new token")[0]
                prompt2 = replace_token(prompt1, self.edit_pos, new_token)
            else:
                prompt2 = self._read(self.prompt2, "r2")
            self.result = probe_with_tokenizer(
                RequestSpec(prompt1, self.r1_salt, self.r1_lora), RequestSpec(prompt2, self.r2_salt, self.r2_lora),
                self.mode if self.real else WORDS, block_size=self.block_size, hash_algo=self.algo,
                hash_seed=self.seed()[0],
            )
        except PrefixLabError as err:
            self.error = str(err)
        return self.result

    def changed(self) -> list[int]:
        """r2's blocks whose hash differs from r1's block at the same position."""
        assert self.result is not None
        return changed_blocks(self.result.cached.blocks, self.result.probe.blocks)

    def notes(self, quote: Callable[[str], str] = str) -> list[str]:
        """What the student should see in the result, one Markdown sentence each (``quote`` escapes tokens)."""
        result = self.result
        assert result is not None
        num_full, changed = len(result.probe.full_blocks), self.changed()
        notes = []
        if self.edited:
            before, after = result.cached.tokens_text[self.edit_pos], result.probe.tokens_text[self.edit_pos]
            notes.append(f"r2 is r1 with token {self.edit_pos} changed from {quote(repr(before))} to "
                         f"{quote(repr(after))}: it sits in block {self.edit_pos // self.block_size}.")
        if changed:
            notes.append(f"Hashes differ from r1 from block {changed[0]} on ({len(changed)} of {num_full}): "
                         "each hash includes its parent, so one change travels down the whole chain.")
        else:
            notes.append("Every full block of r2 has the same hash as r1's block at the same position.")
        if (self.r1_salt or None) != (self.r2_salt or None):
            notes.append("The cache salt is an extra key of **block 0 only**, yet every hash differs: the chain carries it.")
        if (self.r1_lora or None) != (self.r2_lora or None):
            notes.append("The LoRA name is an extra key of **every block**: the same tokens under another adapter "
                         "give other K/V.")
        if len(result.probe.blocks) > num_full:
            tail = result.probe.blocks[-1]
            notes.append(f"Block {tail.index} holds only {len(tail.token_ids)} of {self.block_size} tokens: "
                         "a partial block is never hashed.")
        return notes

    def full_hash_rows(self) -> list[dict[str, object]]:
        """Both requests' full hashes side by side, block by block."""
        assert self.result is not None
        cached, probe = self.result.cached.blocks, self.result.probe.blocks
        rows: list[dict[str, object]] = []
        for index in range(max(len(cached), len(probe))):
            a = cached[index] if index < len(cached) else None
            b = probe[index] if index < len(probe) else None
            rows.append({
                "block": index,
                "r1 hash": a.block_hash.hex() if a and a.block_hash else "never hashed",
                "r2 hash": b.block_hash.hex() if b and b.block_hash else "never hashed",
                "r2 extra keys": describe_extra_keys(b.extra_keys) if b else "",
            })
        return rows
