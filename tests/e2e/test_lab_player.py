"""The lab's browser player in chromium: keys, transitions, autoplay without round trips, projector.

The player (ui/lab_player) gets the whole timeline once; these tests check in a real browser
that stepping animates (a transition runs, a block passes through intermediate positions),
that autoplay sends nothing to the server per frame (websocket frames counted), that keys work
after clicking a toggle, that projector mode fits one 1024x768 screen, and that "predict the
victim" stops playback, takes a guess and explains it without a server round trip.
"""

from __future__ import annotations

from tests.e2e.harness import open_page, wait_idle

PLAYER = "iframe[title*=lab_player]"


def player_frame(page):  # type: ignore[no-untyped-def]
    page.wait_for_selector(PLAYER, timeout=30_000)
    frame = page.frame_locator(PLAYER).first
    frame.locator("#card").wait_for(timeout=30_000)
    handle = page.query_selector(PLAYER)
    return handle.content_frame()


def pos(frame) -> int:  # type: ignore[no-untyped-def]
    return int(frame.evaluate("() => window.prefixlabPlayer.pos"))


def step_until(page, frame, key: str, expected: int) -> None:  # type: ignore[no-untyped-def]
    for _ in range(40):
        if pos(frame) == expected:
            return
        page.keyboard.press(key)
        page.wait_for_timeout(120)
    assert pos(frame) == expected


def test_keys_step_with_a_running_transition(page, app_url) -> None:  # type: ignore[no-untyped-def]
    open_page(page, f"{app_url}/lab?scenario=design-doc&policy=vllm")
    frame = player_frame(page)
    assert pos(frame) == 0
    # After clicking a toggle (focus on a Streamlit switch) the arrow keys still step the lab.
    page.get_by_text("Compare versions").click()
    wait_idle(page)
    frame = player_frame(page)
    page.keyboard.press("ArrowRight")
    page.wait_for_timeout(200)
    assert pos(frame) == 1, "→ did nothing after clicking a toggle"
    page.get_by_text("Compare versions").click()  # off again
    wait_idle(page)
    frame = player_frame(page)
    step_until(page, frame, "ArrowRight", 3)
    page.wait_for_timeout(900)  # let the last step's transitions finish
    chip = "[data-key=b1]"
    start = frame.evaluate(f"() => document.querySelector('{chip}').getBoundingClientRect().y")
    page.keyboard.press("ArrowRight")  # event 4: r0 is allocated blocks 1-4 from the free queue
    samples = []
    for _ in range(6):
        page.wait_for_timeout(60)
        samples.append(frame.evaluate(
            f"() => [document.querySelector('{chip}').getBoundingClientRect().y,"
            " document.getAnimations().filter(a => a.playState === 'running').length]"))
    page.wait_for_timeout(1000)
    end = frame.evaluate(f"() => document.querySelector('{chip}').getBoundingClientRect().y")
    assert pos(frame) == 4
    assert end > start + 20, "block 1 did not move from the free queue down to r0's block table"
    assert any(n > 0 for _, n in samples), f"no transition ran: {samples}"
    middle = [y for y, _ in samples if start + 2 < y < end - 2]
    assert middle, f"block 1 jumped instead of moving: start {start}, samples {samples}, end {end}"
    outlined = frame.evaluate("() => [...document.querySelectorAll('.tile.touched')].map(t => +t.dataset.block)")
    assert outlined == [1, 2, 3, 4]
    page.keyboard.press("ArrowLeft")
    page.wait_for_timeout(200)
    assert pos(frame) == 3
    page.evaluate("() => document.activeElement && document.activeElement.blur()")  # nothing focused: Space plays
    page.keyboard.press("Space")
    frame.wait_for_function("() => window.prefixlabPlayer.playing", timeout=5_000)
    page.keyboard.press("Space")
    frame.wait_for_function("() => !window.prefixlabPlayer.playing", timeout=5_000)


def test_autoplay_makes_no_server_round_trip_per_frame(page, app_url) -> None:  # type: ignore[no-untyped-def]
    sent: list[object] = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda payload: sent.append(payload)))
    open_page(page, f"{app_url}/lab?scenario=design-doc&policy=classic")
    frame = player_frame(page)
    n = int(frame.evaluate("() => window.prefixlabPlayer.n"))
    assert n >= 40
    frame.select_option("#speed", "4")
    page.wait_for_timeout(500)
    before = len(sent)
    frame.click("#play")
    page.wait_for_function(f"() => document.querySelector('{PLAYER}').contentWindow.prefixlabPlayer.pos >= {n}",
                           timeout=n * 1000)
    during = len(sent) - before
    assert during <= 2, f"autoplay of {n} events sent {during} websocket frames"
    page.wait_for_timeout(1500)  # resting: the step goes back once, for the URL
    wait_idle(page)
    assert f"step={n}" in page.url
    print(f"\nautoplay: {n} events played, {during} websocket frames sent while playing")


def test_projector_fits_one_screen(browser, app_url) -> None:  # type: ignore[no-untyped-def]
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    page = context.new_page()
    try:
        open_page(page, f"{app_url}/lab?projector=1&scenario=eviction-pressure&step=30")
        frame = player_frame(page)
        page.wait_for_timeout(800)
        assert not page.query_selector("[data-testid=stSidebar]").is_visible()
        top = page.query_selector(PLAYER).bounding_box()["y"]
        for part in ("#controls", "#card", "#pool", "#flow", "#hashes"):
            box = frame.evaluate(f"() => {{ const r = document.querySelector('{part}').getBoundingClientRect();"
                                 " return [r.top, r.bottom]; }")
            assert top + box[1] <= 768, f"{part} ends at {top + box[1]:.0f} px, below the first screen"
        sizes = frame.evaluate("() => [...document.querySelectorAll('.tile .id, .tile .ref, .tile .hash, .chip')]"
                               ".map(e => parseFloat(getComputedStyle(e).fontSize))")
        assert sizes and min(sizes) >= 16, f"tile text is {min(sizes)} px"
    finally:
        context.close()


def test_forward_has_the_focus_and_no_deploy_button(page, app_url) -> None:  # type: ignore[no-untyped-def]
    """The lab opens with Forward focused (no Tab stop before it); Streamlit's Deploy button is hidden."""
    open_page(page, f"{app_url}/lab")
    frame = player_frame(page)
    page.wait_for_timeout(500)
    assert frame.evaluate("() => document.activeElement && document.activeElement.id") == "fwd"
    deploy = page.query_selector("[data-testid=stAppDeployButton]")
    assert deploy is None or not deploy.is_visible()
    page.keyboard.press("Enter")  # Forward, pressed from the keyboard straight away
    page.wait_for_timeout(200)
    assert pos(frame) == 1
    frame.click("#log summary")  # the event log follows the player
    frame.wait_for_function("() => document.querySelector('#log-lines').innerText.includes('ARRIVE')", timeout=10_000)


def test_predict_the_victim_is_asked_and_answered_in_the_player(page, app_url) -> None:  # type: ignore[no-untyped-def]
    """Autoplay stops before the evicting allocation; guesses (keyboard and mouse) are judged in the browser."""
    sent: list[object] = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda payload: sent.append(payload)))
    open_page(page, f"{app_url}/lab?scenario=design-doc&policy=classic&predict=1")
    frame = player_frame(page)
    (question,) = frame.evaluate("() => window.prefixlabPlayer.questions")
    ask_at, reveal_at, answer = question["ask_at"], question["reveal_at"], question["answer"]
    assert answer == 4 and answer in question["queue"]
    panel = frame.locator("#predict")
    assert f"Playback stops before event {ask_at + 1}" in panel.inner_text()

    frame.select_option("#speed", "4")
    page.wait_for_timeout(500)
    before = len(sent)
    frame.click("#play")
    frame.wait_for_function("() => window.prefixlabPlayer.asking === 0", timeout=ask_at * 1000)
    page.wait_for_timeout(800)  # autoplay has stopped at the question: it does not run past it
    assert pos(frame) == ask_at and not frame.evaluate("() => window.prefixlabPlayer.playing")
    page.keyboard.press("ArrowRight")  # → cannot skip the question
    page.wait_for_timeout(200)
    assert pos(frame) == ask_at
    picks = [int(b) for b in frame.locator("#predict .pick").evaluate_all("bs => bs.map(b => b.dataset.block)")]
    assert picks == question["queue"]
    assert frame.evaluate("() => document.activeElement.dataset.block") == str(picks[0]), frame.evaluate("() => document.activeElement.outerHTML.slice(0, 120) + document.hasFocus()")

    # A wrong guess from the keyboard: the focused block, Enter. The explanation names the rule.
    assert picks[0] != answer
    page.keyboard.press("Enter")
    frame.wait_for_function(f"() => window.prefixlabPlayer.pos === {reveal_at}", timeout=10_000)
    frame.locator("#predict .continue").wait_for(timeout=5_000)
    text = panel.inner_text()
    assert f"Not quite: you picked {picks[0]}, but block {answer} is evicted" in text
    assert "Blocks without a hash are reused silently; the first one still holding a hash is evicted" in text
    assert len(sent) - before == 0, f"playing to the question and guessing sent {len(sent) - before} websocket frames"

    # Back to the start asks again; End stops at the question too; the right block, clicked, is right.
    page.keyboard.press("Home")
    page.wait_for_timeout(300)
    assert pos(frame) == 0 and "Playback stops before event" in panel.inner_text()
    page.keyboard.press("End")
    frame.wait_for_function("() => window.prefixlabPlayer.asking === 0", timeout=5_000)
    assert pos(frame) == ask_at
    page.wait_for_timeout(1000)  # the step Home and End caused has gone to the server by now
    before = len(sent)
    frame.click(f"#predict .pick[data-block='{answer}']")
    frame.locator("#predict .continue").wait_for(timeout=10_000)
    assert f"Right! Block {answer} is evicted" in panel.inner_text()
    assert frame.locator("#predict.right").count() == 1 and pos(frame) == reveal_at
    assert len(sent) - before == 0, f"a guess sent {len(sent) - before} websocket frames"
    frame.click("#predict .continue")  # and playback goes on past the allocation
    page.wait_for_timeout(300)
    assert pos(frame) == reveal_at + 1
    page.get_by_text("Predict the victim").click()  # the Streamlit toggle stays the on/off switch
    wait_idle(page)
    frame = player_frame(page)
    frame.wait_for_function("() => document.querySelector('#predict').hidden", timeout=10_000)
    assert "predict=1" not in page.url
