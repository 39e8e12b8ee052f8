"""Live-view fixtures: the shipped vLLM recordings, the default model's tokenizer, free ports."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from tests.ports import for_worker

ROOT = Path(__file__).resolve().parents[2]
#: Real recordings of a vLLM 0.32 server's KV events: the copy in the repository, else the shared one beside it.
RECORDINGS = next((folder for folder in (ROOT / "tests" / "fixtures" / "vllm-kv-events",
                                         ROOT.parent / "shared" / "fixtures" / "vllm-kv-events") if folder.is_dir()),
                  ROOT / "tests" / "fixtures" / "vllm-kv-events")
#: The ports this test folder may use (each test folder has its own range, so folders never collide).
ZMQ_PORTS = for_worker(range(5700, 5800))
HTTP_PORTS = for_worker(range(8200, 8300))


def free_port(candidates: range) -> int:
    for port in candidates:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {candidates}")


def recording_pairs() -> list[tuple[Path, Path]]:
    """(frames.jsonl, requests.json) for every shipped recording; empty when the folder is absent."""
    if not RECORDINGS.is_dir():
        return []
    return [(path, path.with_name(path.name.removesuffix(".jsonl") + ".requests.json"))
            for path in sorted(RECORDINGS.glob("*.jsonl"))]


def load_requests(path: Path) -> list[dict[str, Any]]:
    return json.loads(path.read_text())


@pytest.fixture(scope="session")
def hf_tokenizer() -> Any:
    """The default model's tokenizer (the model vLLM served for the recordings and the live test)."""
    try:
        from transformers import AutoTokenizer

        from engine.config import DEFAULT_MODEL
        from engine.model.loader import resolve_model_folder

        return AutoTokenizer.from_pretrained(resolve_model_folder(DEFAULT_MODEL))
    except Exception as exc:  # no model package / folder: the tests that need text skip
        pytest.skip(f"the default model's tokenizer is not available: {exc}")


def chat_prompt_ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """The prompt token ids a server builds for ``messages`` (the model's chat template)."""
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if hasattr(ids, "keys"):
        ids = ids["input_ids"]
    return list(ids)
