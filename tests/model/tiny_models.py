"""Tiny randomly initialised models, built from a config and saved to a folder (no download).

Big enough to exercise every part of the forward pass (several layers, grouped-query attention,
q/k/v biases for Qwen2, learned positions for GPT-2), small enough to run in milliseconds.
A larger ``initializer_range`` than the default spreads the logits so greedy ties are unlikely.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

COMMON = dict(vocab_size=128, bos_token_id=None, eos_token_id=None, pad_token_id=None, tie_word_embeddings=True)


def tiny_config(family: str):
    from transformers import GPT2Config, LlamaConfig, Qwen2Config

    if family == "llama":
        return LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, max_position_embeddings=256, initializer_range=0.1,
                           architectures=["LlamaForCausalLM"], **COMMON)
    if family == "qwen2":
        return Qwen2Config(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, max_position_embeddings=256, initializer_range=0.1,
                           rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
                           architectures=["Qwen2ForCausalLM"], **COMMON)
    if family == "gpt2":
        return GPT2Config(n_embd=64, n_layer=2, n_head=4, n_positions=256, initializer_range=0.1,
                          architectures=["GPT2LMHeadModel"], **COMMON)
    raise ValueError(family)


def save_tiny_model(family: str, folder: Path, seed: int = 0) -> Path:
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(tiny_config(family), dtype=torch.float32)
    model.save_pretrained(folder)
    return folder


def hf_greedy(hf_model, prompt_ids: list[int], max_new_tokens: int) -> list[int]:
    """The oracle: transformers' own greedy ``generate`` with its own KV cache."""
    ids = torch.tensor([prompt_ids])
    with torch.inference_mode():
        out = hf_model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                max_new_tokens=max_new_tokens, min_new_tokens=0, pad_token_id=0)
    return out[0, len(prompt_ids):].tolist()


@pytest.fixture(scope="session")
def tiny_model_dirs(tmp_path_factory):
    """Folders of tiny llama / qwen2 / gpt2 models, built once per test session."""
    root = tmp_path_factory.mktemp("tiny-models")
    return {family: str(save_tiny_model(family, root / family)) for family in ("llama", "qwen2", "gpt2")}
