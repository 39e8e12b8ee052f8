"""Loading: clear errors for bad model names, and a GGUF conversion that never leaves half a cache."""

import os
import time

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


# -- the converted-model cache: checksums, orphans, incomplete folders (issue 13) ------------------------
def _cached_tiny_model(tmp_path, monkeypatch, tiny_model_dirs, name="tiny-cached"):
    """A tiny llama standing in for a converted built-in model, in a private cache folder."""
    import shutil

    monkeypatch.setenv("PREFIXLAB_CACHE_DIR", str(tmp_path))
    monkeypatch.setitem(loader.BUNDLED_GGUF, name, ("prefixlab_no_such_package", "tiny.gguf"))
    folder = tmp_path / "models" / name
    shutil.copytree(tiny_model_dirs["llama"], folder)
    loader.write_marker(folder, "tiny.gguf")
    return folder


def _load(name="tiny-cached"):
    import torch

    return loader.load_model(name, torch.float32, torch.device("cpu"))


def test_cached_model_with_same_size_corrupted_weights_is_refused(tmp_path, monkeypatch, tiny_model_dirs):
    folder = _cached_tiny_model(tmp_path, monkeypatch, tiny_model_dirs)
    assert _load().folder == folder  # intact: loads
    weights = folder / "model.safetensors"
    size = weights.stat().st_size
    with open(weights, "r+b") as handle:  # flip one byte in the middle of the tensors
        handle.seek(size // 2)
        byte = handle.read(1)
        handle.seek(size // 2)
        handle.write(bytes([byte[0] ^ 0xFF]))
    assert weights.stat().st_size == size
    with pytest.raises(ConfigError, match="corrupted") as info:
        _load()
    assert f"Delete the folder {folder}" in str(info.value)


def test_orphaned_conversion_folders_are_removed_and_fresh_ones_kept(tmp_path, monkeypatch, tiny_model_dirs):
    folder = _cached_tiny_model(tmp_path, monkeypatch, tiny_model_dirs)
    old, fresh = folder.parent / ".tiny-cached-abc123", folder.parent / ".tiny-cached-def456"
    old.mkdir()
    (old / "model.safetensors").write_bytes(b"half")
    fresh.mkdir()  # another process converting right now
    stale = time.time() - loader.ORPHAN_AGE_S - 60
    os.utime(old, (stale, stale))
    _load()
    assert not old.exists() and fresh.exists()


def test_a_cache_folder_without_its_marker_is_removed_not_kept_forever(tmp_path, monkeypatch, tiny_model_dirs):
    folder = _cached_tiny_model(tmp_path, monkeypatch, tiny_model_dirs)
    (folder / loader.MARKER).unlink()
    messages = []
    with pytest.raises(ConfigError, match="prefixlab-no-such-package"):  # the conversion itself needs the GGUF
        loader.resolve_model_folder("tiny-cached", progress=lambda f, m: messages.append(m))
    assert not folder.exists()  # the next start converts into a clean folder instead of failing again
    assert any("incomplete" in m for m in messages)


def test_a_cache_converted_before_checksums_gets_them_once(tmp_path, monkeypatch, tiny_model_dirs):
    import json

    folder = _cached_tiny_model(tmp_path, monkeypatch, tiny_model_dirs)
    (folder / loader.MARKER).write_text(json.dumps({"source": "tiny.gguf"}))
    _load()
    assert "model.safetensors" in json.loads((folder / loader.MARKER).read_text())["files"]
