"""The engine's view of a transformers tokenizer: ``encode(text) -> ids``, ``decode(ids) -> text``.

A thin adapter so the engine never deals with BatchEncodings, and so generated text reads like
text: special tokens such as ``<|im_end|>`` are dropped when decoding.
"""

from __future__ import annotations

from typing import Any


class TextTokenizer:
    def __init__(self, hf_tokenizer: Any) -> None:
        self.hf_tokenizer = hf_tokenizer

    @property
    def chat_template(self) -> str | None:
        return getattr(self.hf_tokenizer, "chat_template", None)

    def encode(self, text: str) -> list[int]:
        return list(self.hf_tokenizer.encode(text))

    def decode(self, token_ids: list[int]) -> str:
        return self.hf_tokenizer.decode(token_ids, skip_special_tokens=True)

    def apply_chat_template(self, messages: list[dict[str, str]]) -> list[int]:
        """Token ids of the conversation, ending with the assistant's turn opener."""
        ids = self.hf_tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if hasattr(ids, "keys"):  # transformers 5 returns a BatchEncoding
            ids = ids["input_ids"]
        return list(ids)
