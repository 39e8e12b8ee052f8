"""Inside a vLLM venv: import the runners once, then run each job in a forked child.

Importing vLLM and torch takes most of a differential run's time (tens of seconds on a small CPU),
and every test used to start a fresh ``python -m`` for it. This process pays the import once; each
job (one line of JSON on stdin: module, arguments, files for the child's stdout and stderr) runs
``python -m module args`` semantics in a ``fork()``: the child starts from the imported state, runs
the module as ``__main__``, and exits, so whatever a job patches (a deliberately broken rule, an
environment variable) dies with it. A job's module is imported here first (the runners only act
under ``__main__``), so the next job of that module starts warm. One line ``FORK-RUNNER DONE <exit
code>`` answers each job::

    python -m tests.vllm.fork_runner < jobs.jsonl
"""

from __future__ import annotations

import importlib
import json
import os
import runpy
import sys

DONE = "FORK-RUNNER DONE"


def run_job(module: str, argv: list[str], stdout_path: str, stderr_path: str) -> int:
    """Fork; the child runs ``module`` as ``__main__`` with ``argv`` and its output in the two files."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            for fd, path in ((1, stdout_path), (2, stderr_path)):
                target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(target, fd)
                os.close(target)
            sys.argv = [module, *argv]
            sys.modules.pop(module, None)  # as ``python -m``: the module itself runs only as __main__
            try:
                runpy.run_module(module, run_name="__main__", alter_sys=True)
                code = 0
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        except BaseException:  # a crash is the job's result, as in a fresh process
            import traceback

            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def preload(module: str) -> None:
    """Import ``module`` here, once; a failure is left for the child to show in its own stderr."""
    try:
        importlib.import_module(module)
    except Exception:
        pass


def main() -> int:
    for line in sys.stdin:
        job = json.loads(line)
        preload(job["module"])
        code = run_job(job["module"], job["argv"], job["stdout"], job["stderr"])
        print(f"{DONE} {code}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
