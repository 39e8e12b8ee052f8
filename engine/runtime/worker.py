"""The forward passes of a server's shared model, in a process of their own.

Python runs one thread at a time (the GIL). A forward pass is ~450 small tensor ops, and it hands
the GIL back at each; in a server whose page scripts run Python in other threads, each hand-back
waits for them. Measured on 2 cores: a 9-token step that takes 64 ms alone took 371 ms next to ONE
thread running pure Python, 2.1 s next to four. vLLM meets the same problem by running its engine
core in a separate process from the API server; here the same cut is made one level lower: the
sessions' engines (schedulers, pools, samplers) and the :class:`~engine.runtime.batching.StepBatcher`
that merges their steps stay in the server, and only the merged pass crosses to a worker process,
which holds the weights and the KV pages. A pass goes over a socket as plain lists
(:class:`~engine.model.packing.StepInputs`) and comes back as a :class:`~engine.model.packing.PassOutput`
(an argmax per sampling row; whole logits only for rows that draw at random).

The server keeps a :class:`WorkerExecutor` (the runtime's :class:`~engine.runtime.executor.Executor`
for a worker) and its :class:`WorkerModel`: what an engine needs to know about the model (tokenizer,
vocabulary, KV layout), without its weights.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np
import torch

from engine.errors import PrefixLabError
from engine.model.loader import Progress
from engine.model.packing import PassOutput, StepInputs
from engine.model.tokenizer import TextTokenizer
from engine.model.weights import KVLayout
from engine.runtime.executor import Executor
from engine.runtime.host import tune_host
from engine.runtime.huge_pages import huge_pages_env
from engine.runtime.shared_pages import SharedPages

#: Seconds to wait for the worker to load the model (a first start converts the GGUF, ~30 s).
LOAD_TIMEOUT_S = 600.0


@dataclass
class WorkerModel:
    """The model as an engine in the server sees it: everything but weights, which live in the worker.

    It is a :class:`~engine.model.weights.ModelShape`, as :class:`~engine.model.weights.ModelWeights` is,
    so a :class:`~engine.runtime.batching.BatchedBackend` runs on either; there is no forward pass here.
    """

    device: torch.device
    dtype: torch.dtype
    tokenizer: TextTokenizer | None
    eos_token_ids: set[int]
    vocab_size: int
    max_model_len: int
    kv_layout: KVLayout

    @property
    def kv_bytes_per_token(self) -> int:
        return self.kv_layout.bytes_per_token(self.dtype)


class WorkerExecutor(Executor):
    """A child process that loads ``name`` and runs forward passes over its own KV pages of ``budget_mib``.

    Here :attr:`pages` are those pages' shape only (``meta``): engines take their rows of them, the
    worker writes the real ones.
    """

    def __init__(self, name: str, dtype: str | None, device: str, budget_mib: int,
                 progress: Progress | None = None, timeout_s: float = LOAD_TIMEOUT_S, threads: int | None = None) -> None:
        """``threads``: the most CPU threads a pass may use (default: every core; fewer when the machine
        is busy, see :mod:`~engine.model.threads`)."""
        # A plain child process, not multiprocessing's: that one re-runs the server's main script
        # (under Streamlit, a page) in the child before anything else.
        ours, theirs = socket.socketpair()
        job = json.dumps({"name": name, "dtype": dtype, "device": device, "budget_mib": budget_mib, "threads": threads})
        source = str(Path(__file__).resolve().parents[2])  # the folder that holds the ``engine`` package
        env = huge_pages_env(os.environ)  # the weights on huge pages: see engine.runtime.huge_pages
        tune_host(env)  # the worker's torch loads with these settings
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [source, env.get("PYTHONPATH")]))
        self.process = subprocess.Popen([sys.executable, "-m", "engine.runtime.worker", str(theirs.fileno()), job],
                                        pass_fds=[theirs.fileno()], env=env, stdin=subprocess.DEVNULL)
        theirs.close()
        self._conn = Connection(ours.detach())
        self._lock = threading.Lock()
        self._unread = 0
        try:
            reply = self._reply(timeout_s, progress)
        except BaseException:
            self.close()
            raise
        self.model = WorkerModel(device=torch.device(reply["device"]), dtype=getattr(torch, reply["dtype"]),
                                 tokenizer=reply["tokenizer"], eos_token_ids=set(reply["eos_token_ids"]),
                                 vocab_size=reply["vocab_size"], max_model_len=reply["max_model_len"],
                                 kv_layout=KVLayout(*reply["kv_layout"]))
        self.pages = SharedPages(self.model, budget_mib, device=torch.device("meta"))

    def _reply(self, timeout_s: float, progress: Progress | None = None) -> Any:
        """The worker's next answer (relaying its progress reports); raises when it fails or stops."""
        while True:
            try:
                if not self._conn.poll(timeout_s):
                    self._unread += 1  # its answer comes later: the next pass must not take it for its own
                    raise PrefixLabError(f"The model process did not answer within {timeout_s:.0f} s.")
                kind, payload = self._conn.recv()
            except (EOFError, OSError):
                raise self._stopped() from None
            if kind == "progress":
                if progress is not None:
                    progress(*payload)
            elif kind == "error":
                raise PrefixLabError(payload)
            else:
                return payload

    def run(self, inputs: StepInputs, timeout_s: float) -> PassOutput:
        """One forward pass in the worker."""
        with self._lock:
            self._skip_late_answers(timeout_s)
            try:
                self._conn.send(inputs)
            except OSError:
                raise self._stopped() from None
            argmax, drawn, width, data = self._reply(timeout_s)
        logits = torch.from_numpy(np.frombuffer(data, dtype=np.float32).reshape(sum(drawn), width).copy())
        return PassOutput(argmax, logits, drawn)

    def _skip_late_answers(self, timeout_s: float) -> None:
        """Read and drop the answers of passes that timed out, so that no pass takes another's logits."""
        while self._unread:
            if not self._conn.poll(timeout_s):
                raise PrefixLabError(f"The model process is still busy with a pass that took over {timeout_s:.0f} s.")
            try:
                self._conn.recv()
            except (EOFError, OSError):
                raise self._stopped() from None
            self._unread -= 1

    def _stopped(self) -> PrefixLabError:
        try:
            code: int | None = self.process.wait(1.0)
        except subprocess.TimeoutExpired:
            code = None
        return PrefixLabError(f"The model process stopped (exit code {code}); restart the server.")

    def close(self) -> None:
        """Stop the worker (it also stops by itself when the server's end of the socket closes)."""
        self._conn.close()
        try:
            self.process.wait(5.0)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def serve(conn: Connection, name: str, dtype: str | None, device: str, budget_mib: int, threads: int | None) -> None:
    """The worker process: load the model, then run each pass it receives until the socket closes."""
    from engine.model.loader import load_model
    from engine.model.runner import pick_device, pick_dtype
    from engine.model.weights import ModelWeights
    from engine.runtime.executor import InProcessExecutor

    try:
        where = pick_device(device)
        weights = ModelWeights(load_model(name, pick_dtype(dtype, where), where,
                                          lambda f, m: conn.send(("progress", (f, m)))))
        here = InProcessExecutor(weights, budget_mib, threads)  # the real pages, and the passes on them
    except Exception as exc:  # the server shows it: no traceback, the loader's own words
        conn.send(("error", str(exc) if isinstance(exc, PrefixLabError) else f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", {
        "device": str(weights.device), "dtype": str(weights.dtype).removeprefix("torch."),
        "tokenizer": weights.tokenizer, "eos_token_ids": sorted(weights.eos_token_ids), "vocab_size": weights.vocab_size,
        "max_model_len": weights.max_model_len, "kv_layout": tuple(weights.kv_layout),
    }))
    while True:
        try:
            inputs: StepInputs = conn.recv()
        except (EOFError, OSError):  # the server is gone
            os._exit(0)
        try:
            out = here.run(inputs, timeout_s=float("inf"))
            conn.send(("pass", (out.argmax, out.drawn, out.logits.shape[1], out.logits.cpu().numpy().tobytes())))
        except Exception as exc:  # this pass fails for its sessions; the worker goes on
            conn.send(("error", f"{type(exc).__name__}: {exc}"))


if __name__ == "__main__":  # started by WorkerExecutor: the socket's file descriptor, then the job as JSON
    settings = json.loads(sys.argv[2])
    serve(Connection(int(sys.argv[1])), settings["name"], settings["dtype"], settings["device"], settings["budget_mib"],
          settings["threads"])
