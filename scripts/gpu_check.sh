#!/usr/bin/env bash
# On a machine with a CUDA GPU: the tiny-model equivalence tests (the engine picks CUDA by itself)
# and the real-model check (scripts/gpu_check.py). Run from the repository root.
set -euo pipefail
export PYTHONPATH="$PWD"
PY=${PYTHON:-.venv/bin/python}
"$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA GPU visible to torch')"
"$PY" -m pytest -q -p no:cacheprovider tests/equivalence tests/model/test_fast_paths.py
"$PY" scripts/gpu_check.py
