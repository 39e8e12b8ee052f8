"""A sweep of random scenario texts and URL values: never a traceback, never a run past the budget."""

from __future__ import annotations

import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from teaching import limits
from teaching.pages.lab import build_runs
from teaching.scenarios.scenario import ScenarioError
from teaching.scenarios.share import decompress_text, text_from_params

#: Numbers a hostile or careless link carries: small, huge, signed, unicode digits, junk.
NUMBERS = st.one_of(
    st.integers(0, 40).map(str), st.integers(0, 10**12).map(str), st.sampled_from(["²", "٣", "-1", "+3", "1_0", "", "9" * 50]),
)
WORDS = st.lists(st.sampled_from(["A", "B", "C", "D", "x", "<a>", "![i](u)", "é"]), min_size=0, max_size=12)
LINE = st.one_of(
    st.builds(lambda k, n: f"{k} {n}", st.sampled_from(["blocks", "block_size", "max_num_seqs", "max_num_batched_tokens", "step"]), NUMBERS),
    st.builds(lambda i, w, n, o: f"request r{i}: {' '.join(w)} | max_tokens={n}" + (f" output={' '.join(o)}" if o else ""),
              st.integers(0, 6), WORDS, NUMBERS, WORDS),
    st.builds(lambda i: f"finish r{i}", st.integers(0, 6)),
    st.sampled_from(["run", "reset", "step", "# comment", "", "request r0 A B", "frobnicate 3"]),
    st.text(max_size=30),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(LINE, max_size=25))
def test_random_scenarios_never_crash_or_overrun(lines):
    text = "\n".join(lines)
    start = time.monotonic()
    try:
        build_runs(text)
    except ScenarioError:
        pass
    # The lab's two runs share one budget; parsing and setup before the first check add a little.
    assert time.monotonic() - start < limits.SCENARIO_TIME_BUDGET_S + 2.0


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["sid", "z", "text", "step", "line", "blocks"]), st.text(max_size=200)))
def test_random_url_values_never_crash(params):
    from teaching.scenarios.share import ScenarioStore

    text = text_from_params(params, ScenarioStore())
    assert text is None or len(text) <= limits.MAX_SCENARIO_CHARS
    for key in ("step", "line", "blocks"):
        value = limits.parse_whole_number(params.get(key), 0, 10**6)
        assert value is None or 0 <= value <= 10**6
    decompress_text(params.get("z", ""))
