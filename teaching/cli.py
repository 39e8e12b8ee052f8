"""Command line: ``prefixlab app|generate|bench|replay``.

``app`` starts the Streamlit app (what ``make run`` does).

``generate`` runs one prompt on the real model and prints the text and the request's metrics
(cached vs computed prefill tokens, TTFT, decode speed). ``bench`` runs the prefix-cache
benchmark (``bench/prefix_cache.py``). ``replay`` plays a scenario (a file in the format of
``docs/scenarios.md``, or a built-in one) on the simulator and prints every cache event in words.
"""

from __future__ import annotations

import argparse
import sys

from engine.config import DEFAULT_MODEL
from engine.errors import PrefixLabError


def progress(fraction: float, message: str) -> None:
    print(f"[{fraction:4.0%}] {message}", file=sys.stderr, flush=True)


def generate(args: argparse.Namespace) -> int:
    from engine import EngineConfig, LLMEngine, SamplingParams

    # The sampling settings first: a bad one is reported before the model takes seconds to load.
    params = SamplingParams(max_tokens=args.max_tokens, temperature=args.temperature, top_p=args.top_p,
                            top_k=args.top_k, seed=args.seed)
    engine = LLMEngine(EngineConfig(model=args.model, enable_prefix_caching=not args.no_cache), progress=progress)
    prompt = [{"role": "user", "content": args.prompt}] if args.chat else args.prompt
    output = engine.generate([prompt], params)[0]
    print(output.text)
    print(file=sys.stderr)
    print(f"finish: {output.finish_reason}", file=sys.stderr)
    for key, value in output.metrics.as_dict().items():
        shown = f"{value:.3f}" if isinstance(value, float) else value
        print(f"{key}: {shown}", file=sys.stderr)
    return 0


def read_scenario_file(path: str) -> str:
    """A scenario file's text, read no further than the size limit (``/dev/zero`` never ends)."""
    from teaching.limits import MAX_SCENARIO_CHARS, LimitError

    limit = 4 * MAX_SCENARIO_CHARS  # UTF-8 takes at most 4 bytes per character
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise LimitError(f"{path!r} is over {limit:,} bytes; a scenario may be at most {MAX_SCENARIO_CHARS:,} characters.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LimitError(f"{path!r} is not UTF-8 text (byte {exc.start} is {data[exc.start:exc.start + 1]!r}); "
                         "save the scenario as UTF-8.") from None


def replay(args: argparse.Namespace) -> int:
    from teaching.describe import describe_event  # the CLI is a front end, like the app: same wording
    from teaching.scenario import ScenarioError, run_scenario
    from teaching.scenario_library import BUILTIN_SCENARIOS

    if args.scenario in BUILTIN_SCENARIOS:
        text = BUILTIN_SCENARIOS[args.scenario]
    else:
        try:
            text = read_scenario_file(args.scenario)
        except PrefixLabError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except OSError as exc:
            print(f"error: cannot read {args.scenario!r} ({exc.strerror}); built-in scenarios: "
                  f"{', '.join(BUILTIN_SCENARIOS)}", file=sys.stderr)
            return 2
    try:
        run = run_scenario(text, args.policy)
    except ScenarioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for span in run.spans:
        print(f"line {span.action.line_no}: {span.action.source.strip()}" + (f"  ({span.note})" if span.note else ""))
        for event in run.events[span.start : span.end]:
            print(f"    {describe_event(event, run.token_text)}")
    final = run.timeline().state_at(len(run.events))
    stats = run.engine.kv_cache_manager.prefix_cache_stats
    print(f"\nfree queue (head -> tail): {final.free_queue}")
    print(f"evictions: {final.num_evictions}; prefix cache hit rate: {stats.hit_rate:.0%} "
          f"({stats.hits} of {stats.queries} prompt tokens)")
    return 0


def run_app(extra: list[str]) -> int:
    """``streamlit run app.py`` with the flags an offline classroom machine wants."""
    import subprocess
    from pathlib import Path

    app_file = Path(__file__).resolve().parents[1] / "app.py"
    if not app_file.exists():
        print("error: app.py not found; run PrefixLab from its repository (pip install -e .)", file=sys.stderr)
        return 2
    command = [sys.executable, "-m", "streamlit", "run", str(app_file), "--server.fileWatcherType", "none",
               "--server.headless", "true", "--browser.gatherUsageStats", "false", *extra]
    return subprocess.call(command, cwd=app_file.parent)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="prefixlab", description="PrefixLab from the command line.")
    commands = parser.add_subparsers(dest="command", required=True)

    app = commands.add_parser("app", help="start the Streamlit app (its options pass through to streamlit run)")
    app.set_defaults(passthrough=True)

    gen = commands.add_parser("generate", help="generate text for one prompt and print its metrics")
    gen.add_argument("--prompt", required=True)
    gen.add_argument("--chat", action="store_true", help="wrap the prompt as a user message in the chat template")
    gen.add_argument("--max-tokens", type=int, default=64)
    gen.add_argument("--model", default=DEFAULT_MODEL, help="built-in name, transformers folder or hub id")
    gen.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    gen.add_argument("--top-p", type=float, default=1.0)
    gen.add_argument("--top-k", type=int, default=0)
    gen.add_argument("--seed", type=int, default=None)
    gen.add_argument("--no-cache", action="store_true", help="disable prefix caching")

    commands.add_parser("bench", help="prefix caching on vs off vs transformers (bench/prefix_cache.py); "
                        "its options (--quick, ...) pass through")

    rep = commands.add_parser("replay", help="play a scenario on the simulator and print every cache event in words")
    rep.add_argument("scenario", help="a scenario file (docs/scenarios.md), or a built-in name such as design-doc")
    rep.add_argument("--policy", choices=["vllm", "classic"], default="vllm", help="free rule (default vllm)")

    args, rest = parser.parse_known_args(argv)
    if args.command == "app":
        return run_app(rest)
    if rest and args.command != "bench":
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command == "replay":
        return replay(args)  # simulator only: no torch, instant
    from transformers.utils import logging as hf_logging  # keep the terminal for our own output

    import engine.model  # noqa: F401  (before torch loads: see its OMP_WAIT_POLICY note)

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    if args.command == "bench":
        try:
            from bench import prefix_cache
        except ImportError:
            print("The benchmark lives in bench/prefix_cache.py: run it from the repository root.", file=sys.stderr)
            return 2
        sys.argv = ["bench.prefix_cache", *rest]
        prefix_cache.main()
        return 0
    try:
        return generate(args)
    except PrefixLabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
