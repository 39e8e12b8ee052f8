"""Loading: clear errors for bad model names, and a GGUF conversion that never leaves half a cache."""

import os

import pytest

from engine import EngineConfig, LLMEngine
from engine.errors import ConfigError
from engine.model import loader


def test_unknown_model_path_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        LLMEngine(EngineConfig(model=str(tmp_path / "no-such-model")))


def test_folder_without_config_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="config.json"):
        LLMEngine(EngineConfig(model=str(tmp_path)))


def test_unsupported_architecture_names_what_is_supported(tmp_path):
    from transformers import BertConfig

    BertConfig(vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
               intermediate_size=32, architectures=["BertForMaskedLM"]).save_pretrained(tmp_path)
    with pytest.raises(ConfigError, match="LlamaForCausalLM") as info:
        LLMEngine(EngineConfig(model=str(tmp_path)))
    assert "BertForMaskedLM" in str(info.value)


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("PREFIXLAB_CACHE_DIR", str(tmp_path))
    assert loader.cache_dir() == tmp_path
    monkeypatch.delenv("PREFIXLAB_CACHE_DIR")
    assert loader.cache_dir().parts[-2:] == (".cache", "prefixlab")


def test_failed_conversion_leaves_no_cache_folder(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"not a gguf file at all")
    target = tmp_path / "cache" / "models" / "broken"
    with pytest.raises(Exception):  # noqa: B017  (any loader error will do; the point is the cleanup)
        loader.convert_gguf(bad, target)
    assert not target.exists()
    assert os.listdir(target.parent) == []  # the temporary folder is gone too


def test_bundled_gguf_is_found_without_importing_its_package():
    path = loader.bundled_gguf_path("smollm2-135m-instruct")
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000
