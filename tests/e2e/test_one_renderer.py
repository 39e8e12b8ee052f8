"""One renderer of the pool: the lab, a lesson, the Playground (after one request), the KV cache groups page and
the second-tier page draw the pool, the free queue, the block tables and the hash table with the same player
component, in normal and projector mode."""

from __future__ import annotations

import pytest

from tests.e2e.harness import assert_no_exceptions, open_page, wait_idle

PLAYER = "iframe[title*=lab_player]"
ROOT_EL = "[data-testid=prefixlab-player]"


def player_root(page, mode: str) -> dict:  # type: ignore[no-untyped-def]
    """The player on this page: its component name (the iframe's title), mode, and what it drew."""
    page.wait_for_selector(PLAYER, timeout=60_000)
    frame = page.frame_locator(PLAYER).first
    frame.locator(f"{ROOT_EL}[data-mode={mode}] .tile").first.wait_for(timeout=60_000)
    title = page.locator(PLAYER).first.get_attribute("title")
    page.wait_for_timeout(400)  # a frame that grew re-lays out after its resize settles (150 ms)
    return frame.locator(ROOT_EL).evaluate(
        "(el, title) => ({title, mode: el.dataset.mode, projector: el.classList.contains('projector'),"
        " tiles: el.querySelectorAll('#pool .tile').length, chips: el.querySelectorAll('#flow .chip').length,"
        " hashes: !!el.querySelector('#hashes'),"
        # how much of its column the pool's grid fills: a frame laid out at a hidden iframe's 300 px stays narrow
        " fill: Math.max(...[...el.querySelectorAll('#pool .tile')].map(t => t.getBoundingClientRect().right))"
        "   / (document.body.classList.contains('narrow') ? document.body.clientWidth"
        "      : (document.body.clientWidth - 14) / 2.15)})", title)


def send_one_request(page, app_url: str, query: str) -> None:  # type: ignore[no-untyped-def]
    open_page(page, f"{app_url}/playground{query}", timeout_ms=180_000)
    page.get_by_role("button", name="Send", exact=True).wait_for(timeout=180_000)
    box = page.locator("[data-testid=stNumberInput]", has_text="Max tokens").locator("input")
    box.fill("3")
    box.press("Enter")
    wait_idle(page)
    page.get_by_role("button", name="Send", exact=True).click()
    page.wait_for_function("() => document.body.innerText.includes('TTFT')", timeout=180_000)
    wait_idle(page, timeout_ms=180_000)


@pytest.mark.parametrize("projector", [False, True], ids=["normal", "projector"])
def test_lab_lesson_and_playground_show_the_same_player(page, app_url, projector: bool) -> None:  # type: ignore[no-untyped-def]
    page.set_viewport_size({"width": 1024, "height": 768})
    query = "&projector=1" if projector else ""
    open_page(page, f"{app_url}/lab?scenario=design-doc&step=4{query}")
    lab = player_root(page, "lab")
    open_page(page, f"{app_url}/?lesson=01-kv-blocks&line=4{query}")
    lesson = player_root(page, "view")
    assert page.locator(".pl-pool").count() == 0  # no HTML twin of the player's views
    send_one_request(page, app_url, "?projector=1" if projector else "")
    playground = player_root(page, "engine")
    assert page.locator(".js-plotly-plot", has_text="Physical KV blocks").count() == 0  # no Plotly twin
    open_page(page, f"{app_url}/groups{'?projector=1' if projector else ''}")
    groups = player_root(page, "view")
    assert page.frame_locator(PLAYER).first.locator("#groups table.hits").count() == 1  # the groups drawn there too
    open_page(page, f"{app_url}/second_tier{'?projector=1' if projector else ''}")
    tier = player_root(page, "view")
    assert page.frame_locator(PLAYER).first.locator("#host .hblock").count() > 0  # and the host tier
    assert page.locator(".kvg, .tt-block").count() == 0  # no HTML twin left
    shown = [lab, lesson, playground, groups, tier]
    assert len({p["title"] for p in shown}) == 1, shown  # one component
    assert all(p["tiles"] > 2 and p["chips"] > 0 and p["hashes"] for p in shown), shown
    assert all(p["projector"] is projector for p in shown), shown
    assert all(p["fill"] > 0.9 for p in shown), shown  # each pool spans its column, at the frame's real width
    assert_no_exceptions(page)
