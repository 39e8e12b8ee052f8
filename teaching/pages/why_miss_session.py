"""The Why did it miss? page's state without Streamlit: two requests, the settings, the engine's verdict.

The page keeps one :class:`WhyMissSession` in session state: a preset fills its request fields
(:meth:`WhyMissSession.load_preset`), the widgets edit them, and :meth:`WhyMissSession.run` runs r1
on a simulator and looks r2 up with the engine's own ``get_computed_blocks``.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import PrefixLabError
from teaching.pages.prefix_probe import ProbeResult, RequestSpec
from teaching.pages.real_tokens import WORDS, probe_with_tokenizer
from teaching.pages.why_miss import MissExplanation, explain

SYSTEM = "system : you are a helpful tutor . user :"
#: name -> (r1 prompt, salt, LoRA, r2 prompt, salt, LoRA)
PRESETS: dict[str, tuple[str, str, str, str, str, str]] = {
    "One word differs": (
        f"{SYSTEM} my dog ate my homework , help", "", "", f"{SYSTEM} my cat ate my homework , help", "", ""),
    "Same prompt, another cache salt": (
        f"{SYSTEM} explain prefix caching", "alice", "", f"{SYSTEM} explain prefix caching", "bob", ""),
    "Same prompt, r2 uses a LoRA adapter": (
        f"{SYSTEM} explain prefix caching", "", "", f"{SYSTEM} explain prefix caching", "", "sql-lora"),
    "Identical prompts (last-token rule)": (
        "a b c d e f g h i j k l", "", "", "a b c d e f g h i j k l", "", ""),
    "r2 continues r1's conversation": (
        f"{SYSTEM} hi there !", "", "", f"{SYSTEM} hi there ! assistant : hello ! user : a joke please", "", ""),
}
#: The request fields a preset fills, in PRESETS' order.
FIELDS = ("r1_prompt", "r1_salt", "r1_lora", "r2_prompt", "r2_salt", "r2_lora")


@dataclass
class WhyMissSession:
    """r1 and r2 as the student set them, how they are tokenized and hashed, and the last verdict."""

    preset: str = next(iter(PRESETS))
    r1_prompt: str = ""
    r1_salt: str = ""
    r1_lora: str = ""
    r2_prompt: str = ""
    r2_salt: str = ""
    r2_lora: str = ""
    block_size: int = 4
    algo: str = "sha256"
    tokenizer: str = WORDS
    result: ProbeResult | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        if not (self.r1_prompt or self.r2_prompt):
            self.load_preset(self.preset)

    def load_preset(self, name: str) -> None:
        """Copy a preset into the request fields (they stay editable)."""
        self.preset = name
        for field_name, value in zip(FIELDS, PRESETS[name]):
            setattr(self, field_name, value)

    def run(self) -> ProbeResult | None:
        """r1 runs, r2 is looked up: the result, or None with :attr:`error` in the engine's words."""
        self.result, self.error = None, None
        try:
            self.result = probe_with_tokenizer(
                RequestSpec(self.r1_prompt, self.r1_salt, self.r1_lora),
                RequestSpec(self.r2_prompt, self.r2_salt, self.r2_lora),
                self.tokenizer, block_size=self.block_size, hash_algo=self.algo,
            )
        except PrefixLabError as err:
            self.error = str(err)
        return self.result

    def explanation(self) -> MissExplanation:
        assert self.result is not None
        return explain(self.result)
