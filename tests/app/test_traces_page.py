"""Production traces page (AppTest): the sample replays at once, the curve and routers render."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from teaching.traces.loader import TraceError
from teaching.traces.page import MAX_PAGE_BLOCKS, MAX_UPLOAD_BYTES, load_upload
from tests.app.conftest import figure, page_path


@pytest.fixture(scope="module")
def at() -> AppTest:
    app = AppTest.from_file(page_path("traces"), default_timeout=300).run()
    assert not app.exception, app.exception
    return app


def test_sample_curve_has_every_policy_and_the_ceiling(at: AppTest) -> None:
    assert [m.value for m in at.metric][:2] == ["500", "14,162"]
    fig = figure(at, "Hit rate against cache capacity")
    assert [t["name"] for t in fig["data"]] == ["vLLM 0.33 LRU", "vLLM 0.23 (classic) LRU", "radix-tree LRU (SGLang)",
                                                "Belady optimum (leaves)"]
    assert fig["layout"]["xaxis"]["type"] == "log" and fig["data"][0]["x"][0] == 20 * 512
    assert "unbounded cache: 16.4%" in fig["layout"]["annotations"][0]["text"]
    table = at.dataframe[0].value
    assert list(table["capacity (tokens)"])[-1] == "unbounded" and len(table) == 9
    along = figure(at, "Along the trace")
    assert len(along["data"]) == 12 and len(along["data"][0]["x"]) > 100


def test_routers_compare_on_request(at: AppTest) -> None:
    at.number_input(key="tr_rep_blocks").set_value(1000)
    at.button(key="tr_route_run").click().run()
    assert not at.exception, at.exception
    fig = figure(at, "Routers compared")
    assert list(fig["data"][0]["x"]) == ["random", "round-robin", "least-loaded", "prefix", "blend"]
    assert fig["data"][1]["y"][3] == pytest.approx(4.0)  # pure prefix: one replica does everything


def test_overlap_mode_replays_again(at: AppTest) -> None:
    at.radio(key="tr_mode").set_value("overlap").run()
    assert not at.exception, at.exception
    assert figure(at, "Hit rate against cache capacity")["data"][0]["y"]


def test_uploads_are_bounded_and_validated() -> None:
    with pytest.raises(TraceError, match="uploads are limited"):
        load_upload("big.jsonl", b"x" * (MAX_UPLOAD_BYTES + 1))
    with pytest.raises(TraceError, match="line 1"):
        load_upload("bad.jsonl", b'{"timestamp": 0}\n')
    line = '{"timestamp": 0, "input_length": 1000000, "output_length": 1, "hash_ids": %s}\n'
    many = "".join(line % list(range(1954)) for _ in range(MAX_PAGE_BLOCKS // 1954 + 1))
    with pytest.raises(TraceError, match="this page replays at most"):
        load_upload("many.jsonl", many.encode())
