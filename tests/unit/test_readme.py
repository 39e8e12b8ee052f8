"""The README stays true: its engine example runs as written, and every link and path it names exists."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_LINES = 250
#: A path as the README names one in backticks: folders and files of the repository.
PATH = re.compile(r"`(\.?[A-Za-z0-9_][A-Za-z0-9_.*-]*(?:/[A-Za-z0-9_.*-]+)*/?)`")
FILE_ENDINGS = (".py", ".md", ".toml", ".txt", ".ini", ".jsonl", ".png")


def text() -> str:
    return README.read_text(encoding="utf-8")


def section(title: str) -> str:
    body = text().split(f"\n## {title}\n", 1)[1]
    return body.split("\n## ", 1)[0]


def test_readme_is_short() -> None:
    assert len(text().splitlines()) <= MAX_LINES


def test_engine_block_runs_as_written() -> None:
    block = re.search(r"```python\n(.*?)```", section("The engine in ten lines"), re.DOTALL)
    assert block, "the engine section has a python block"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", block.group(1)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    first, free_queue, state = done.stdout.splitlines()
    assert first == "8", "the second prompt hit two blocks of four tokens, as its comment says"
    assert free_queue.startswith("[") and "'req-0': [1, 2, 3]" in state


def test_every_relative_link_exists() -> None:
    links = re.findall(r"\]\(([^)\s]+)\)", text())
    assert links
    for link in links:
        if re.match(r"[a-z]+:", link) or link.startswith("#"):
            continue
        assert (ROOT / link.split("#", 1)[0]).exists(), f"README links to {link}, which does not exist"


def named_paths(line: str) -> list[str]:
    return [p for p in PATH.findall(line) if "/" in p or p.endswith(FILE_ENDINGS)]


def test_every_named_path_exists() -> None:
    """A name is looked up from the repository root, or in the folder its table row is about."""
    checked = 0
    for line in text().splitlines():
        names = named_paths(line)
        folders = [ROOT / n for n in names if n.endswith("/")][:1]
        for name in names:
            bases = [ROOT, *folders]
            found = any(list(base.glob(name)) if "*" in name else (base / name).exists() for base in bases)
            assert found, f"README names {name!r}, which does not exist (line: {line[:100]!r})"
            checked += 1
    modules = re.findall(r"python -m ([a-z_]+(?:\.[a-z_]+)+)", text())
    for module in modules:
        path = ROOT / module.replace(".", "/")
        assert path.with_suffix(".py").exists() or (path / "__main__.py").exists(), f"no module {module}"
    assert checked > 30, "the path pattern still finds the README's paths"


def test_make_targets_it_names_exist() -> None:
    makefile = (ROOT / "Makefile").read_text()
    for target in set(re.findall(r"`make ([a-z-]+)`", text())):
        assert re.search(rf"^{target}:", makefile, re.MULTILINE), f"README names make {target}"
