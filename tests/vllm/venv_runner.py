"""The test side of :mod:`tests.vllm.fork_runner`: one warm runner per vLLM venv, shared by a session.

``run(python, module, *args)`` behaves like ``subprocess.run([python, "-m", module, *args])`` with
the repository on ``PYTHONPATH`` (it returns the same ``CompletedProcess``), but vLLM and torch are
imported once per venv instead of once per test.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.vllm.fork_runner import DONE

REPO_ROOT = Path(__file__).resolve().parents[2]


class VenvRunner:
    """``python -m tests.vllm.fork_runner`` in one venv, fed one job at a time."""

    def __init__(self, python: Path, workdir: Path) -> None:
        self.workdir = workdir
        self.jobs = 0
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "VLLM_LOGGING_LEVEL": "ERROR"}
        self.log = open(workdir / "fork_runner.log", "w")
        self.process = subprocess.Popen([str(python), "-m", "tests.vllm.fork_runner"], cwd=REPO_ROOT, env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                        start_new_session=True)  # its own group: a timeout kills the job too

    def run(self, module: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        self.jobs += 1
        out, err = self.workdir / f"job{self.jobs}.out", self.workdir / f"job{self.jobs}.err"
        assert self.process.stdin is not None and self.process.stdout is not None
        job = {"module": module, "argv": list(args), "stdout": str(out), "stderr": str(err)}
        self.process.stdin.write(json.dumps(job) + "\n")
        self.process.stdin.flush()
        code = self._answer(timeout)
        return subprocess.CompletedProcess([module, *args], code, out.read_text(), err.read_text())

    def _answer(self, timeout: float) -> int:
        """The job's exit code, read from the runner's ``DONE`` line (anything else it prints is skipped)."""
        assert self.process.stdout is not None
        while True:
            ready, _, _ = select.select([self.process.stdout], [], [], timeout)
            if not ready:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.stop()
                raise subprocess.TimeoutExpired(self.process.args, timeout)
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"the fork runner exited ({self.process.wait()}):\n{self.log_tail()}")
            if line.startswith(DONE):
                return int(line.split()[-1])

    def log_tail(self) -> str:
        self.log.flush()
        return (self.workdir / "fork_runner.log").read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        """Stop it between jobs (its interpreter's own shutdown takes seconds, for nothing)."""
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        self.log.close()


class VenvRunners:
    """One :class:`VenvRunner` per venv python, started on first use."""

    def __init__(self, new_workdir: Callable[[], Path]) -> None:
        self.new_workdir = new_workdir
        self.runners: dict[Path, VenvRunner] = {}

    def run(self, python: Path, module: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        runner = self.runners.get(python)
        if runner is None or runner.process.poll() is not None:
            runner = self.runners[python] = VenvRunner(python, self.new_workdir())
        return runner.run(module, *args, timeout=timeout)

    def stop(self) -> None:
        for runner in self.runners.values():
            runner.stop()
