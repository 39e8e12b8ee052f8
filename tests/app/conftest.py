"""AppTest helpers: run the real app.py (navigation + sidebar) and read figures as JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "app.py")
TIMEOUT = 60


def page_path(name: str) -> str:
    """The file of one page, e.g. ``page_path("hash_chain")``."""
    return str(Path(__file__).resolve().parents[2] / "app_pages" / f"{name}.py")


def run_page(name: str, timeout: int = TIMEOUT) -> AppTest:
    """Run one page file on its own, and fail on any exception it shows."""
    app = AppTest.from_file(page_path(name), default_timeout=timeout).run()
    assert not app.exception, app.exception
    return app


def new_app(**query: str) -> AppTest:
    """The whole app opened on the lab. The lab tests are written around vLLM's design-doc example,
    so that is the scenario unless ``scenario=`` says otherwise (a first visit is tested apart)."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    query.setdefault("scenario", "design-doc")
    at.query_params.update(query)
    at.switch_page("app_pages/lab.py")
    return at


@pytest.fixture
def lab() -> AppTest:
    at = new_app()
    at.run()
    assert not at.exception, at.exception
    return at


def figures(at: AppTest) -> list[dict]:
    """Every Plotly chart on the page, as the figure dict the browser receives."""
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def figure(at: AppTest, title_part: str, nth: int = 0) -> dict:
    matches = [f for f in figures(at) if title_part in (f["layout"].get("title") or {}).get("text", "")]
    return matches[nth]


def shape(fig: dict, name: str) -> dict:
    return next(s for s in fig["layout"]["shapes"] if s.get("name") == name)


def markdown_text(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def player_args(proto: Any) -> dict:
    """A player component's arguments as ``player.js`` gets them: the timelines (sent as JSON bytes,
    ``data`` and Compare's ``other_data``) parsed back into ``data`` and ``other.data``."""
    args = json.loads(proto.json_args)
    timelines = {arg.key: json.loads(arg.bytes) for arg in proto.special_args}
    args["data"] = timelines["data"]
    if args.get("other") is not None:
        args["other"]["data"] = timelines["other_data"]
    return args


def player(at: AppTest) -> dict:
    """The arguments the lab page passed to the browser player."""
    (element,) = [e for e in at.get("component_instance") if "lab_player" in e.proto.component_name]
    return player_args(element.proto)
