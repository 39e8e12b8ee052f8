"""Where the real vLLM venvs live (built outside the project), and a skip when one is missing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

#: The venv whose vLLM recorded the KV-event fixtures (same major wire format).
VLLM_CPU_VENV = "cpu-0.32.0"


def vllm_python(venv: str = VLLM_CPU_VENV) -> Path:
    """The venv's python, or a pytest skip that says how to get it."""
    root = Path(os.environ.get("PREFIXLAB_VLLM_ENV_DIR", Path.home() / ".cache" / "prefixlab-vllm"))
    python = root / venv / "bin" / "python"
    if not python.exists():
        pytest.skip(f"vLLM venv {venv!r} not found under {root} (build it with the shared vllm-env tool)")
    return python
