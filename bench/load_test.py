"""A room of students on one PrefixLab server, without a browser: Streamlit's own websocket protocol.

Starts the app (``streamlit run app.py`` with the repository's ``.streamlit/config.toml``) on a
loopback port, then opens websocket sessions that speak Streamlit's protocol (``BackMsg`` /
``ForwardMsg`` protobufs on ``/_stcore/stream``), exactly what a browser tab sends:

* ``--autoplay`` sessions play the lab. Playback runs in the browser's lab player; the server
  hears of it when playback rests (the player reports its position: one rerun), here every 5 s;
* ``--steppers`` sessions press Forward in the lab once a second: the player draws the step at
  once and reports it 0.7 s later (one rerun, what "lab step" times);
* ``--playground`` sessions send the preset's questions to the real model, one at a time, starting
  once every lab session has drawn its first page (0.7 s apart).

It reports lab-step latency (click -> the run's ``script_finished``), the Playground's time to
first streamed text (TTFT; a session's first request, which computes the preset's system prompt in
its empty pool, and its later ones, each against the same kind of request on an idle server, measured
first), ``/_stcore/health``
latency, websocket drops and the server's RSS. ``--gc-compare`` also measures the server CPU per
lab step with Streamlit's post-run full GC on and off (model loaded). Everything is bounded: the
session count, the duration (``--seconds``), and every wait has a timeout.

    python -m bench.load_test --seconds 60            # 10 + 10 + 10 sessions
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Subprotocol

ROOT = Path(__file__).resolve().parents[1]
RUN_TIMEOUT_S = 120.0  # one script run (a Playground answer on a loaded CPU can take a while)
REST_EVERY_S = 5.0  # how often an autoplaying student's in-browser player reports where it rests
STEPPED_EVENTS = 20  # the lab's students step through the first events of the scenario, round and round


# -- one browser tab ------------------------------------------------------------------------------------------
@dataclass
class Tab:
    """A websocket session: sends reruns (with widget triggers), reads what the server draws."""

    base: str
    page: str = ""
    query: str = ""
    conn: ClientConnection | None = None
    buttons: dict[str, tuple[str, str]] = field(default_factory=dict)  # key part -> (widget id, fragment id)
    disabled: dict[str, bool] = field(default_factory=dict)
    player: tuple[str, str] | None = None  # the lab player component's (widget id, fragment id)
    nonce: int = 0
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    started: bool = False  # a script run began after the last rerun request was sent
    first_text_at: float | None = None
    alerts: list[str] = field(default_factory=list)  # what the last run said in st.error / st.warning / st.info
    closed_unexpectedly: bool = False
    running: bool = True

    async def connect(self) -> None:
        self.conn = await connect(f"ws://{self.base}/_stcore/stream", open_timeout=30, max_size=64 * 2**20,
                                  subprotocols=[Subprotocol("streamlit")], ping_interval=None)
        asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        assert self.conn is not None
        while True:
            try:
                raw = await self.conn.recv()
            except ConnectionClosed:
                if self.running:
                    self.closed_unexpectedly = True
                self.finished.set()
                return
            if isinstance(raw, str):
                continue
            msg = ForwardMsg()
            msg.ParseFromString(raw)
            kind = msg.WhichOneof("type")
            if kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
                element = msg.delta.new_element
                which = element.WhichOneof("type")
                if which == "button":
                    key = element.button.id.rsplit("-", 1)[-1]
                    self.buttons[key] = (element.button.id, msg.delta.fragment_id)
                    self.disabled[key] = element.button.disabled
                elif which == "component_instance" and element.component_instance.component_name.endswith("lab_player"):
                    self.player = (element.component_instance.id, msg.delta.fragment_id)
                elif which == "alert":
                    self.alerts.append(element.alert.body)
                elif which == "exception":
                    self.alerts.append(f"{element.exception.type}: {element.exception.message}")
                elif which == "markdown" and "▌" in element.markdown.body and self.first_text_at is None:
                    self.first_text_at = time.monotonic()  # the Playground's first streamed text
            elif kind == "new_session":  # every script run (a fragment's too) starts with one
                self.started = True
            elif kind == "script_finished" and self.started and msg.script_finished != ForwardMsg.FINISHED_EARLY_FOR_RERUN:
                # The run our request started, to its end: not the end of a run that was already going (the
                # server stops that one for ours), nor of one that stops to rerun (the Playground after an answer).
                self.finished.set()

    async def rerun(self, trigger: str | None = None, *, player_step: int | None = None) -> float:
        """One script run (optionally clicking the button whose key is ``trigger``, or with the lab player
        reporting that it rests at ``player_step``, as the browser's player does); returns its seconds."""
        assert self.conn is not None
        back = BackMsg()
        state = back.rerun_script
        state.query_string = self.query
        state.page_name = self.page
        if trigger is not None:
            widget_id, state.fragment_id = self.buttons[trigger]
            widget = state.widget_states.widgets.add()
            widget.id = widget_id
            widget.trigger_value = True
        if player_step is not None:
            if self.player is None:
                raise RuntimeError("the lab player was not drawn")
            self.nonce += 1
            widget = state.widget_states.widgets.add()
            widget.id, state.fragment_id = self.player
            widget.json_value = json.dumps({"step": player_step, "block": None, "nonce": f"load-{self.nonce}"})
        self.finished.clear()
        self.started = False
        self.first_text_at = None
        self.alerts = []
        start = time.monotonic()
        await self.conn.send(back.SerializeToString())
        await asyncio.wait_for(self.finished.wait(), RUN_TIMEOUT_S)
        if self.closed_unexpectedly:
            raise ConnectionError("websocket dropped")
        return time.monotonic() - start

    async def wait_for_player(self, timeout: float = 30.0) -> None:
        """Until the lab player is drawn (the first visit may take a second run to draw the page)."""
        deadline = time.monotonic() + timeout
        while self.player is None:
            if time.monotonic() > deadline:
                raise RuntimeError("the lab player was not drawn")
            await asyncio.sleep(0.1)

    def close(self) -> None:
        self.running = False
        if self.conn is not None:
            asyncio.get_running_loop().create_task(self.conn.close())


# -- the three kinds of student ---------------------------------------------------------------------------------
@dataclass
class Results:
    steps: list[float] = field(default_factory=list)
    autoplay_ticks: list[float] = field(default_factory=list)
    ttft: list[float] = field(default_factory=list)  # a session's later requests (its system prompt cached)
    ttft_first: list[float] = field(default_factory=list)  # a session's first request (empty pool: all computed)
    requests: list[float] = field(default_factory=list)
    health: list[float] = field(default_factory=list)
    drops: int = 0
    errors: list[str] = field(default_factory=list)
    rss: list[int] = field(default_factory=list)
    labs_seated: int = 0  # lab sessions that have drawn their first page


async def room_seated(results: Results, labs: int, timeout: float = 60.0) -> None:
    """Until every lab session has drawn its first page (at most ``timeout``): the Playground students
    start sending in a working room, after the burst of twenty first page loads, not inside it."""
    deadline = time.monotonic() + timeout
    while results.labs_seated < labs and time.monotonic() < deadline:
        await asyncio.sleep(0.1)


async def stepper(base: str, results: Results, until: float) -> None:
    tab = Tab(base, page="lab", query="scenario=eviction-pressure")
    await tab.connect()
    try:
        await tab.rerun()
        await tab.wait_for_player()
        results.labs_seated += 1
        step = 0
        while time.monotonic() < until:
            # Forward in the browser's player: the step is drawn there at once; 0.7 s later the player
            # reports where it rests (one rerun, what this times).
            step = step % STEPPED_EVENTS + 1
            results.steps.append(await tab.rerun(player_step=step))
            await asyncio.sleep(1.0)
    except Exception as exc:  # a drop or a timeout: counted, the others go on
        results.drops += isinstance(exc, ConnectionError) or tab.closed_unexpectedly
        results.errors.append(f"stepper: {type(exc).__name__}: {exc}")
    finally:
        tab.close()


async def autoplayer(base: str, results: Results, until: float) -> None:
    tab = Tab(base, page="lab", query="scenario=eviction-pressure")
    await tab.connect()
    try:
        await tab.rerun()
        await tab.wait_for_player()
        results.labs_seated += 1
        step = 0
        while time.monotonic() < until:  # the browser plays; the server hears about it when playback rests
            await asyncio.sleep(REST_EVERY_S)
            step = (step + 5) % STEPPED_EVENTS
            results.autoplay_ticks.append(await tab.rerun(player_step=step))
    except Exception as exc:
        results.drops += isinstance(exc, ConnectionError) or tab.closed_unexpectedly
        results.errors.append(f"autoplay: {type(exc).__name__}: {exc}")
    finally:
        tab.close()


async def playground_request(tab: Tab) -> tuple[float, float]:
    """Click Send and wait for the answer; returns (TTFT, whole request) in seconds."""
    start = time.monotonic()
    total = await tab.rerun("pg_send")
    if tab.first_text_at is None:
        said = "; ".join(tab.alerts) or "nothing"
        raise RuntimeError(f"no streamed text (Send was {'disabled' if tab.disabled.get('pg_send') else 'enabled'}; "
                           f"the page said: {said[:300]})")
    ttft = tab.first_text_at - start
    return ttft, total  # the page reran itself after the answer (Send enabled again) before that run ended


async def playground_student(base: str, results: Results, until: float, delay: float, labs: int) -> None:
    tab = Tab(base, page="playground")
    await tab.connect()
    try:
        await tab.rerun()
        await room_seated(results, labs)
        await asyncio.sleep(delay)
        first = True
        while time.monotonic() < until:
            ttft, total = await playground_request(tab)
            (results.ttft_first if first else results.ttft).append(ttft)
            first = False
            results.requests.append(total)
            await asyncio.sleep(2.0)
    except Exception as exc:
        results.drops += isinstance(exc, ConnectionError) or tab.closed_unexpectedly
        results.errors.append(f"playground: {type(exc).__name__}: {exc}")
    finally:
        tab.close()


async def health_checker(base: str, results: Results, until: float, server: psutil.Process) -> None:
    loop = asyncio.get_running_loop()
    while time.monotonic() < until:
        start = time.monotonic()
        try:
            await loop.run_in_executor(None, lambda: urllib.request.urlopen(f"http://{base}/_stcore/health", timeout=30).read())
            results.health.append(time.monotonic() - start)
        except Exception as exc:
            results.errors.append(f"health: {exc}")
        results.rss.append(sum(p.memory_info().rss for p in [server, *server.children(recursive=True)]))
        await asyncio.sleep(1.0)


# -- the server ---------------------------------------------------------------------------------------------------
def start_server(port: int, post_script_gc: bool) -> subprocess.Popen:
    command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
               "--server.address", "127.0.0.1", "--runner.postScriptGC", str(post_script_gc).lower()]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).read()
            return process
        except OSError:
            time.sleep(0.5)
    process.kill()
    raise RuntimeError("the server did not start")


def stop_server(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def step_cpu(base: str, server: psutil.Process, steps: int = 15) -> float:
    """Server CPU seconds per lab step, one session stepping alone (the model already loaded)."""
    tab = Tab(base, page="lab", query="scenario=eviction-pressure")
    await tab.connect()
    await tab.rerun()
    await tab.wait_for_player()
    before = server.cpu_times()
    for step in range(1, steps + 1):
        await tab.rerun(player_step=step)
    after = server.cpu_times()
    tab.close()
    return (after.user + after.system - before.user - before.system) / steps


async def unloaded_ttft(base: str, sessions: int = 3, later: int = 2) -> tuple[list[float], list[float]]:
    """The Playground's TTFT with nobody else on the server: (first requests of fresh sessions, later ones).

    A session's first request computes the preset's whole system prompt in its empty pool; its later
    ones find it cached. Under load the two are compared each with its own unloaded value.
    """
    warm_up = Tab(base, page="playground")
    await warm_up.connect()
    await warm_up.rerun()
    await playground_request(warm_up)  # loads the model
    warm_up.close()
    first, rest = [], []
    for _ in range(sessions):
        tab = Tab(base, page="playground")
        await tab.connect()
        await tab.rerun()
        await asyncio.sleep(1.0)
        first.append((await playground_request(tab))[0])
        for _ in range(later):
            await asyncio.sleep(1.0)
            rest.append((await playground_request(tab))[0])
        tab.close()
    return first, rest


def full_gc_ms_with_the_model() -> tuple[float, float]:
    """CPU ms of one full ``gc.collect()`` with the model loaded: as it is, and after ``gc.freeze()``.

    This is what Streamlit's post-run GC costs on every script run of every session; ``ui.model``
    freezes the heap after loading the model, and the config turns the post-run GC off.
    """
    import gc

    from engine.model.loader import load_model
    from engine.model.runner import pick_device, pick_dtype

    device = pick_device("auto")
    load_model("smollm2-135m-instruct", pick_dtype(None, device), device)

    def collect_ms() -> float:
        start = time.process_time()
        gc.collect(2)
        return (time.process_time() - start) * 1000

    collect_ms()
    before = min(collect_ms() for _ in range(3))
    gc.freeze()
    after = min(collect_ms() for _ in range(3))
    gc.unfreeze()
    return before, after


async def gc_compare(port: int) -> dict[str, float]:
    result = {}
    for gc_on in (True, False):
        server = start_server(port, gc_on)
        try:
            base = f"127.0.0.1:{port}"
            await unloaded_ttft(base, sessions=0)  # the model is on the heap, as in class
            result[f"post-run GC {'on' if gc_on else 'off'}"] = await step_cpu(base, psutil.Process(server.pid))
        finally:
            stop_server(server)
    return result


async def main_async(args: argparse.Namespace) -> None:
    port = args.port
    if args.gc_compare:
        before, after = full_gc_ms_with_the_model()
        print(f"one full GC with the model loaded: {before:.0f} ms of CPU; after gc.freeze(): {after:.0f} ms")
        for label, seconds in (await gc_compare(port)).items():
            print(f"server CPU per lab step (model loaded, heap frozen), {label}: {seconds * 1000:.0f} ms")
    server = start_server(port, post_script_gc=False)
    base = f"127.0.0.1:{port}"
    try:
        alone_first, alone = await unloaded_ttft(base)
        for label, samples in (("a session's first request", alone_first), ("later requests", alone)):
            print(f"unloaded Playground TTFT, {label}: median {statistics.median(samples):.2f} s "
                  f"({', '.join(f'{s:.2f}' for s in samples)})")
        results = Results()
        until = time.monotonic() + args.seconds
        proc = psutil.Process(server.pid)
        tasks = [health_checker(base, results, until, proc)]
        tasks += [autoplayer(base, results, until) for _ in range(args.autoplay)]
        tasks += [stepper(base, results, until) for _ in range(args.steppers)]
        tasks += [playground_student(base, results, until, i * 0.7, args.autoplay + args.steppers) for i in range(args.playground)]
        await asyncio.wait_for(asyncio.gather(*tasks), args.seconds + RUN_TIMEOUT_S + 30)
        load = os.getloadavg()
        print(f"\n{args.autoplay} autoplaying + {args.steppers} stepping + {args.playground} Playground sessions, "
              f"{args.seconds} s, machine load average {load[0]:.1f} ({os.cpu_count()} cores)")
        print(f"lab step latency: p50 {pct(results.steps, .5):.2f} s, p95 {pct(results.steps, .95):.2f} s "
              f"({len(results.steps)} steps)")
        print(f"autoplay rerun: p50 {pct(results.autoplay_ticks, .5):.2f} s, p95 {pct(results.autoplay_ticks, .95):.2f} s "
              f"({len(results.autoplay_ticks)} ticks)")
        for label, loaded, unloaded in (("a session's first request", results.ttft_first, alone_first),
                                        ("later requests", results.ttft, alone)):
            print(f"Playground TTFT, {label}: p50 {pct(loaded, .5):.2f} s, p95 {pct(loaded, .95):.2f} s "
                  f"= {pct(loaded, .95) / statistics.median(unloaded):.1f}x unloaded ({len(loaded)} requests)")
        print(f"Playground TTFT, all requests: p50 {pct(results.ttft + results.ttft_first, .5):.2f} s, "
              f"p95 {pct(results.ttft + results.ttft_first, .95):.2f} s; whole request p50 {pct(results.requests, .5):.2f} s")
        print(f"health check: p50 {pct(results.health, .5) * 1000:.0f} ms, p95 {pct(results.health, .95) * 1000:.0f} ms")
        print(f"websocket drops: {results.drops}; server RSS max {max(results.rss) / 2**30:.2f} GiB")
        for error in results.errors[:10]:
            print("  error:", error)
    finally:
        stop_server(server)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8451)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--autoplay", type=int, default=10)
    parser.add_argument("--steppers", type=int, default=10)
    parser.add_argument("--playground", type=int, default=10)
    parser.add_argument("--gc-compare", action="store_true", help="also measure server CPU per lab step, GC on vs off")
    args = parser.parse_args()
    for name in ("autoplay", "steppers", "playground"):
        if not 0 <= getattr(args, name) <= 50:
            parser.error(f"--{name} must be 0..50 (this is a bounded test)")
    if not 5 <= args.seconds <= 600:
        parser.error("--seconds must be 5..600")
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
