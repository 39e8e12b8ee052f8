"""The Compare page in AppTest: simulator bars per workload, TTFT on the real model (slow)."""

from __future__ import annotations

import json
import re

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.conftest import run_page


@pytest.fixture
def at() -> AppTest:
    return run_page("compare", timeout=180)


def chart(at: AppTest, title_part: str) -> dict:
    for c in at.get("plotly_chart"):
        fig = json.loads(c.proto.spec)
        if title_part in ((fig["layout"].get("title") or {}).get("text") or ""):
            return fig
    raise AssertionError(f"no chart titled {title_part!r}")


def hit_rates(at: AppTest) -> list[tuple[str, float]]:
    """The first panel of the three-settings bars (HTML: no Plotly chart for the page's first picture)."""
    (html,) = [h.value for h in at.html if "three cache settings" in h.value]
    panel = html.split("Prefill tokens computed")[0]
    return [(key, float(value)) for key, value in re.findall(r"data-setting='(\w+)' data-value='([\d.]+)'", panel)]


def test_generated_trace_shows_three_settings(at: AppTest) -> None:
    assert not at.get("plotly_chart")
    rates = hit_rates(at)
    assert [key for key, _ in rates] == ["off", "vllm", "classic"]
    assert rates[0][1] == 0 and rates[1][1] > rates[2][1] > 0
    table = at.dataframe[0].value
    assert list(table["setting"]) == ["caching off", "vLLM 0.33", "vLLM 0.23 (classic)"]


def test_bigger_pool_raises_the_hit_rate(at: AppTest) -> None:
    before = hit_rates(at)[1][1]
    at.number_input(key="cmp_blocks").set_value(64).run()
    assert not at.exception
    assert hit_rates(at)[1][1] > before


def test_builtin_scenario(at: AppTest) -> None:
    at.selectbox(key="cmp_source").set_value("design-doc").run()
    assert not at.exception
    table = at.dataframe[0].value
    assert list(table["evictions"]) == [0, 0, 1]


@pytest.mark.slow
def test_ttft_on_the_real_model(at: AppTest) -> None:
    assert "Measure TTFT" in at.info[0].value
    at.button(key="cmp_measure").click().run()
    assert not at.exception, at.exception
    fig = chart(at, "Caching off vs on")
    off, on = fig["data"]
    assert len(off["y"]) == len(on["y"]) == 3
    assert on["customdata"][0][0] == 0 and on["customdata"][1][0] > 0  # request 2 hit the system prompt
    assert "sooner" in "\n".join(m.value for m in at.markdown)


def test_a_pool_too_small_for_the_scenario_shows_the_engines_message(at: AppTest) -> None:
    at.session_state["cfg_num_blocks"] = 3  # the shared sidebar's pool size
    at.selectbox(key="cmp_source").set_value("design-doc").run()
    assert not at.exception
    assert "needs 17 KV slots" in at.error[0].value
