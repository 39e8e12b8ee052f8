"""Projector mode on every step of every lesson, in a real chromium at 1024x768: the picture and the
Next button on the first screen, and the first step of each lesson readable as tests/e2e/test_projector.py
asks of every page. (Its own file, so that a parallel test run gives it a worker of its own.)"""

from __future__ import annotations

import re

from tests.e2e.harness import PROJECTOR_SCREEN as SCREEN
from tests.e2e.harness import ROOT, open_page, wait_idle
from tests.e2e.test_projector import problems_on

STEP_LINE = re.compile(r"Step (\d+) of (\d+)")


def lesson_slugs() -> list[str]:
    return [p.stem for p in sorted((ROOT / "lessons").glob("[0-9]*.md"))]


def next_button(page, slug: str):  # type: ignore[no-untyped-def]
    return page.locator(f".st-key-lesson_pos_{slug}_next button").first


def first_screen_misses(page, slug: str) -> list[str]:  # type: ignore[no-untyped-def]
    """What of the picture and the Next button is not on the first 1024x768 screen."""
    missing = []
    box = next_button(page, slug).bounding_box()
    if box is None or box["y"] < 0 or box["y"] + box["height"] > SCREEN["height"]:
        missing.append(f"the Next button is at {box}")
    grid = page.locator("iframe[title*=lab_player]").first  # the player draws the lesson's pool
    grid.wait_for(timeout=30_000)  # its frame arrives a moment after the page's text
    grid_box = grid.bounding_box()
    if grid_box is None or grid_box["y"] < 0 or grid_box["y"] + min(grid_box["height"], 120) > SCREEN["height"]:
        missing.append(f"the block picture is at {grid_box}")
    return missing


def test_every_lesson_step_shows_picture_and_next_on_the_first_screen(screen, app_url) -> None:  # type: ignore[no-untyped-def]
    problems = {}
    for slug in lesson_slugs():
        open_page(screen, f"{app_url}/?lesson={slug}&projector=1")
        text = screen.inner_text("[data-testid=stMain]")
        match = STEP_LINE.search(text)
        assert match, f"{slug}: no 'Step k of n' line"
        total = int(match.group(2))
        for step in range(total + 1):
            if step:
                screen.evaluate("() => { for (const el of [document.querySelector('[data-testid=stMain]'),"
                                " document.scrollingElement]) if (el) el.scrollTo(0, 0); }")
                next_button(screen, slug).click()
                wait_idle(screen)
                screen.wait_for_timeout(300)
            screen.evaluate("() => { for (const el of [document.querySelector('[data-testid=stMain]'),"
                            " document.scrollingElement]) if (el) el.scrollTo(0, 0); }")
            missing = first_screen_misses(screen, slug)
            if step == 0:
                missing += problems_on(screen)
            if missing:
                problems[f"{slug} step {step}"] = missing
    assert not problems, "\n".join(f"{where}:\n  " + "\n  ".join(items) for where, items in problems.items())
