"""The player's extra panels: a hybrid model's groups and the host tier, built from a scenario and sent checked."""

from __future__ import annotations

from pathlib import Path

from engine.timeline import block_contents
from teaching.lessons.loader import load_lessons
from teaching.pages.playback import checked, line_steps, playback
from teaching.pages.second_tier import host_panel, two_tier_views
from teaching.scenarios.scenario import run_scenario
from ui.lab_player import PlayerArgs

LESSONS = Path(__file__).resolve().parents[2] / "lessons"


def second_tier_text() -> str:
    lessons, _ = load_lessons(str(LESSONS))
    return next(lesson for lesson in lessons if lesson.slug.endswith("second-tier")).scenario_text


def test_the_host_tier_marks_what_spilled_and_names_what_came_back() -> None:
    run = run_scenario(second_tier_text())
    panels = [host_panel(view) for view in two_tier_views(run)]
    first = panels[1]  # r1 ran: its three full blocks spilled into the tier
    assert len(first.blocks) == 3 and all(block.stored for block in first.blocks)
    assert first.notes[0].startswith("Spilled to the host tier: 3 block(s)")
    loaded = [panel for panel in panels if any(note.startswith("Loaded back") for note in panel.notes)]
    assert loaded, "the lesson's scenario loads a prefix back from the host tier"
    last = loaded[-1]
    assert len(last.blocks) == 10
    assert "Loaded back: r3 got 12 tokens from the host tier into fresh device blocks" in last.notes


def test_the_panels_travel_with_the_player_args_at_each_lines_step() -> None:
    run = run_scenario(second_tier_text())
    data = playback(run, block_contents(run.events))
    steps = line_steps(run.spans)
    assert steps[0] == 0 and list(steps.values()) == sorted(steps.values())
    view = two_tier_views(run)[1]
    message = checked(PlayerArgs(data=data, data_id="t", step=steps[run.spans[1].action.line_no], mode="view",
                                 host=host_panel(view)))
    assert message["host"]["blocks"][0][1] is True and message["groups"] is None  # a host block is [words, stored]
