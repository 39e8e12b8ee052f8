"""docs/workshop.ipynb runs top to bottom under nbclient, the way a teacher live-codes from it.

Without a class server its server cell says so and skips; the slow test starts ``prefixlab serve``
with the real default model and checks the notebook's two chats share the system prompt's blocks.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="the notebook extra is not installed: pip install -e '.[notebook]'")
nbclient = pytest.importorskip("nbclient", reason="the notebook extra is not installed: pip install -e '.[notebook]'")
pytest.importorskip("ipykernel", reason="the notebook extra is not installed: pip install -e '.[notebook]'")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "docs" / "workshop.ipynb"


def run_notebook(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> tuple[str, object]:
    """Execute every cell in a fresh kernel started in docs/; returns all text output and the notebook."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    for name in ("PREFIXLAB_CLASS_SERVER", "PREFIXLAB_CLASS_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    texts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            texts.append(output.get("text", ""))
            texts.extend(str(v) for k, v in output.get("data", {}).items() if k == "text/plain")
    return "\n".join(texts), notebook


def test_the_committed_notebook_has_no_outputs() -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    assert all(not c.get("outputs") and not c.get("execution_count") for c in notebook.cells if c.cell_type == "code")


def test_the_notebook_runs_top_to_bottom_without_a_server(monkeypatch) -> None:
    text, notebook = run_notebook(monkeypatch, {})
    assert "b's cached tokens: 8" in text
    assert "line 8: step" in text and "line 14: run" in text and "r2 hit" in text
    assert "No class server given" in text
    figures = [o for c in notebook.cells for o in c.get("outputs", []) if "application/vnd.plotly.v1+json" in o.get("data", {})
               or "text/html" in o.get("data", {})]
    assert len(figures) >= 3  # block grid, free queue, the moment r0 finished: drawn inline


@pytest.mark.slow
def test_the_notebook_talks_to_a_class_server(monkeypatch, tmp_path) -> None:
    from tests.server.harness import STUDENT_KEYS, start_server

    server = start_server("--num-blocks", "96", "--api-key", STUDENT_KEYS[0], log_dir=tmp_path, kv_events=False)
    try:
        text, _ = run_notebook(monkeypatch, {"PREFIXLAB_CLASS_SERVER": server.url + "/v1",
                                             "PREFIXLAB_CLASS_KEY": STUDENT_KEYS[0]})
    finally:
        server.stop()
    cached = [int(n) for n in re.findall(r"cached_tokens=(\d+)", text)]
    assert len(cached) == 2 and cached[1] > 0 and cached[1] % 16 == 0
