"""SmolLM2's own tokenizer for Hash chain and Why did it miss?, so a prompt is hashed as vLLM sees it.

The pages' word tokenizer splits on spaces, which is easy to read but hides what a real
tokenizer does: ``"time "`` ends in a token of its own (id 216, a lone space), and a chat
request is wrapped in the model's chat template (a default system prompt, role markers) before
anything is hashed. In real mode a prompt becomes SmolLM2's token ids, and every token is shown
as its text and its id, e.g. ``␣time·655``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from engine.config import DEFAULT_MODEL
from engine.errors import ConfigError, PrefixLabError
from teaching.pages.prefix_probe import ProbeResult, RequestSpec, probe_prefix_cache

WORDS, REAL, REAL_CHAT = "words", "SmolLM2", "SmolLM2 chat"
#: The pages' toggle: how a typed prompt becomes tokens.
TOKENIZER_MODES = (WORDS, REAL, REAL_CHAT)
MODE_HELP = {
    WORDS: "one token per word, numbered from 0 in order of appearance; spaces are dropped",
    REAL: "SmolLM2's tokenizer on the text as typed (a trailing space is a token)",
    REAL_CHAT: "SmolLM2's tokenizer on the text as the user's message in its chat template, as /v1/chat/completions does",
}


@dataclass(frozen=True)
class RealTokenizer:
    """The default model's tokenizer: ids for a text (or a chat turn), and each id's text."""

    hf: Any  # a transformers tokenizer

    def encode(self, text: str, chat: bool = False) -> list[int]:
        if not chat:
            return list(self.hf.encode(text))
        ids = self.hf.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True)
        if hasattr(ids, "keys"):  # transformers 5 returns a BatchEncoding
            ids = ids["input_ids"]
        return list(ids)

    def piece(self, token_id: int) -> str:
        """A token's text with its spaces and newlines visible (``␣``, ``↵``), then its id."""
        text = self.hf.decode([token_id])
        return f"{text.replace(' ', '␣').replace(chr(10), '↵') or '∅'}·{token_id}"


@lru_cache(maxsize=1)
def smollm2_tokenizer() -> RealTokenizer:
    """Load SmolLM2's tokenizer once (the bundled model's folder; converted on first use)."""
    try:
        from transformers import AutoTokenizer

        from engine.model.loader import resolve_model_folder

        return RealTokenizer(AutoTokenizer.from_pretrained(resolve_model_folder(DEFAULT_MODEL)))
    except PrefixLabError:
        raise
    except Exception as exc:  # a missing package or model file: say so instead of a traceback
        raise ConfigError(f"SmolLM2's tokenizer is not available here ({type(exc).__name__}: {exc}); "
                          "use the word tokenizer.") from None


def probe_with_tokenizer(cached: RequestSpec, probe: RequestSpec, mode: str = WORDS, **options: Any) -> ProbeResult:
    """:func:`probe_prefix_cache` with prompts tokenized the way ``mode`` says (see ``TOKENIZER_MODES``)."""
    if mode not in TOKENIZER_MODES:
        raise ConfigError(f"Unknown tokenizer {mode!r}; choose one of {list(TOKENIZER_MODES)}.")
    if mode == WORDS:
        return probe_prefix_cache(cached, probe, **options)
    tokenizer = smollm2_tokenizer()
    texts = (cached.prompt, probe.prompt)
    if not all(isinstance(t, str) for t in texts):
        raise ConfigError("SmolLM2's tokenizer reads text: type the prompts as text, not token ids.")
    chat = mode == REAL_CHAT
    specs = [replace(spec, prompt=tokenizer.encode(str(spec.prompt), chat=chat)) for spec in (cached, probe)]
    return probe_prefix_cache(specs[0], specs[1], token_text=tokenizer.piece, tokenizer=mode,
                              prompt_texts=(str(texts[0]), str(texts[1])), **options)
