"""Regenerate docs/screenshots/<page>.png: every page of the app, in chromium at 1024x768 (a projector).

    python -m scripts.screenshots                      # app.py: every page in its navigation, every lesson
    python -m scripts.screenshots --script app_pages/why_miss.py --full-height
    python -m scripts.screenshots --only hash_chain lab-predict  # just these pictures
    python -m scripts.screenshots --projector --out /tmp/shots  # ?projector=1: every page, every lesson step

Without app.py (early in the project) it shoots each ``app_pages/*.py`` file on its own.
Fails loudly if a page shows a Streamlit exception, so a screenshot is never of a traceback.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from urllib.parse import urlparse

from tests.e2e.harness import (
    CHROMIUM,
    launch_chromium,
    nav_pages,
    open_page,
    start_streamlit,
    track_page_errors,
    wait_idle,
)

ROOT = Path(__file__).resolve().parents[1]
VIEWPORT = {"width": 1024, "height": 768}  # what a classroom projector shows
#: The lab in its other modes: (query, file name).
LAB_SHOTS = [
    ("lab?scenario=eviction-pressure&step=30", "lab-mid-run"),
    ("lab?scenario=design-doc&policy=classic&compare=1&step=35", "lab-compare"),
    ("lab?scenario=eviction-pressure&step=30&projector=1", "lab-projector"),
    ("lab?scenario=design-doc&policy=classic&predict=1&step=33", "lab-predict"),  # asked at event 34
]



def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "home"


def page_name(label: str, href: str) -> str:
    """The URL path of a page (``/why_miss`` -> ``why_miss``), or its label for the default page."""
    path = urlparse(href).path.strip("/")
    return slug(path.split("/")[-1]) if path else slug(label)


def shoot(page, out: Path, full_height: bool) -> None:  # type: ignore[no-untyped-def]
    if full_height:  # Streamlit scrolls inside its main block: grow the window to fit instead
        height = page.evaluate(
            "() => Math.max(...[...document.querySelectorAll('[data-testid=stMain], [data-testid=stAppScrollToBottomContainer]')]"
            ".map(e => e.scrollHeight), document.body.scrollHeight)"
        )
        page.set_viewport_size({"width": VIEWPORT["width"], "height": max(VIEWPORT["height"], int(height) + 40)})
        page.wait_for_timeout(800)
    page.screenshot(path=str(out))
    page.set_viewport_size(VIEWPORT)


def show_playground_at_work(page) -> None:  # type: ignore[no-untyped-def]
    """Send the preset's first two questions, then scroll to them: the second one shows hits."""
    for _ in range(2):
        page.get_by_role("button", name="Send", exact=True).click()
        wait_idle(page, timeout_ms=180_000)
    page.get_by_text("TTFT").first.scroll_into_view_if_needed()
    page.wait_for_timeout(500)


def show_live_at_scale(page) -> None:  # type: ignore[no-untyped-def]
    """Two replicas' KV events (a real engine's, 10,000+ blocks each) over ZMQ: connect, show the trees."""
    import atexit

    from transformers import AutoTokenizer

    from engine.config import DEFAULT_MODEL
    from engine.model.loader import resolve_model_folder
    from tests.live.conftest import ZMQ_PORTS, free_port
    from tests.live.engine_recording import class_prompts, engine_frames
    from tests.live.publisher import ReplayingPublisher

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_folder(DEFAULT_MODEL))
    lines = []
    for index, name in enumerate(("replica-0", "replica-1")):
        events = free_port(ZMQ_PORTS)
        replay = free_port(range(events + 1, ZMQ_PORTS.stop))
        publisher = ReplayingPublisher(events, replay)
        atexit.register(publisher.close)
        prompts = class_prompts(lambda text: tokenizer.encode(text), students=160, turns=5, seed=index)
        for frame in engine_frames(prompts, name):
            publisher.publish(frame.payload, send=False)
        lines.append(f"{name} tcp://127.0.0.1:{events} tcp://127.0.0.1:{replay} -")
    servers = page.locator("[data-testid=stTextArea]", has_text="Servers").locator("textarea")
    servers.fill("\n".join(lines))
    servers.press("Control+Enter")
    page.get_by_role("button", name="Connect", exact=True).click()
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot .gtitle').length >= 2", timeout=180_000)
    page.wait_for_timeout(2500)
    page.get_by_text("Zoom into a branch").first.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.mouse.move(5, 5)  # no hover box in the picture
    page.wait_for_timeout(800)


#: What to do on a page before its picture, so the picture shows the page doing its job.
BEFORE_SHOT = {"playground": show_playground_at_work, "live": show_live_at_scale}


def targets(script: str | None) -> list[str]:
    if script:
        return [script]
    if (ROOT / "app.py").exists():
        return ["app.py"]
    return [str(p.relative_to(ROOT)) for p in sorted((ROOT / "app_pages").glob("*.py")) if not p.name.startswith("_")]


def lesson_slugs() -> list[str]:
    """Each lesson file's name without ``.md`` (``01-kv-blocks``), as the Lessons page's URL uses it."""
    return [p.stem for p in sorted((ROOT / "lessons").glob("[0-9]*.md"))]


def with_projector(url: str) -> str:
    return url + ("&" if "?" in url else "?") + "projector=1"


def shoot_lesson_steps(page, url: str, name: str, out_dir: Path) -> list[Path]:  # type: ignore[no-untyped-def]
    """Open a lesson at its start and press its Next button until the last step: one picture per step."""
    slug = url.split("lesson=")[1].split("&")[0]
    next_button = page.locator(f".st-key-lesson_pos_{slug}_next button").first
    written = []
    for step in range(200):
        if step:
            if next_button.count() == 0 or next_button.is_disabled():
                break
            next_button.click()
            page.mouse.move(2, 760)  # off the button: no tooltip over the picture
            wait_idle(page)
            page.evaluate("() => { for (const el of [document.querySelector('[data-testid=stMain]'),"
                          " document.scrollingElement]) if (el) el.scrollTo(0, 0); }")
            page.wait_for_timeout(300)
        out = out_dir / f"{name}-step-{step:02d}.png"
        page.screenshot(path=str(out))
        written.append(out)
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--script", help="streamlit script to run (default: app.py, else each app_pages/*.py)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshots"), help="output folder")
    parser.add_argument("--full-height", action="store_true", help="capture the whole page, not just 1024x768")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="take only these pictures (file names without .png)")
    parser.add_argument("--projector", action="store_true",
                        help="every page with ?projector=1 (files projector-<page>.png) and every lesson step")
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium).", file=sys.stderr)
        return 2
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)

    from playwright.sync_api import sync_playwright

    written: list[Path] = []
    failures: list[str] = []
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        for script in targets(args.script):
            server = start_streamlit(script)
            try:
                page = browser.new_page(viewport=VIEWPORT)
                errors = track_page_errors(page)
                try:
                    open_page(page, server.url)  # to read the navigation; each page is checked below
                except AssertionError:
                    pass
                pages = nav_pages(page) if script == "app.py" else []
                if not pages:  # a single page script, or an app without navigation
                    pages = [(Path(script).stem, server.url)]
                shots = [(href, page_name(label, href) if script == "app.py" else Path(script).stem) for label, href in pages]
                if script == "app.py":
                    shots += [(server.url + "/" + query, name) for query, name in LAB_SHOTS]
                lessons_href = next((href for href, name in shots if name == "lessons"), None)
                if script == "app.py" and lessons_href is not None:  # the first page: its URL may be the root
                    shots += [(f"{lessons_href.split('?')[0]}?lesson={slug}", f"lesson-{slug[:2]}") for slug in lesson_slugs()]
                if args.projector:
                    shots = [(with_projector(href), f"projector-{name}") for href, name in shots]
                if args.only:
                    shots = [(href, name) for href, name in shots if name in args.only]
                for href, name in shots:
                    url = href if href.startswith("http") else server.url + "/" + href.lstrip("/")
                    errors.clear()  # report each page's own errors
                    try:
                        open_page(page, url, timeout_ms=240_000)  # the Playground may load the model first
                    except AssertionError as err:  # still take the picture: it shows what went wrong
                        failures.append(f"{url}: {err}")
                    page.wait_for_timeout(1200)  # the lab player and charts lay out after the script
                    before = BEFORE_SHOT.get(name.removeprefix("projector-"))
                    if before is not None:
                        before(page)
                    if args.projector and name.startswith("projector-lesson-"):
                        written += shoot_lesson_steps(page, url, name, out_dir)
                        continue
                    out = out_dir / f"{name}.png"
                    shoot(page, out, args.full_height)
                    written.append(out)
                page.close()
            finally:
                server.stop()
        browser.close()
    for path in written:
        print(path)
    for failure in failures:
        print("ERROR", failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
