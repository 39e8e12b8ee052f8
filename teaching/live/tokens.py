"""Turn a block's token ids back into text with the served model's tokenizer (when we have it).

Events carry token ids only. The class server runs PrefixLab's default model unless told
otherwise, so its tokenizer (from the converted model folder; no weights are loaded) is the default.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from engine.config import DEFAULT_MODEL

Decode = Callable[[Sequence[int]], str]


def tokenizer_decoder(model: str = DEFAULT_MODEL) -> Decode:
    """A ``decode(ids) -> text`` that keeps special tokens (a chat template's markers are content here)."""
    from transformers import AutoTokenizer

    from engine.model.loader import resolve_model_folder

    hf = AutoTokenizer.from_pretrained(resolve_model_folder(model))

    def decode(token_ids: Sequence[int]) -> str:
        return str(hf.decode(list(token_ids), skip_special_tokens=False))

    return decode
