// The player's playback reducer on its own (run by tests/unit/test_player_reducer.py with node --test).
import assert from "node:assert/strict";
import test from "node:test";

import { held, initial, nextJump, predictPanel, questionOnTheWay, reduce } from "../../ui/lab_player/reducer.js";

// One question: asked before event 5 (the allocation), revealed after event 7 (its two evictions).
const QUESTION = { ask_at: 4, reveal_at: 7, answer: 3, queue: [2, 3, 5], right: "Right! 3", wrong: "Not quite: you picked {guess}" };
const run = (s, ...actions) => actions.reduce(reduce, s);

test("steps stay inside the timeline", () => {
  const s = initial({ n: 10, step: 3 });
  assert.equal(run(s, { type: "go", to: 4 }).pos, 4);
  assert.equal(run(s, { type: "go", to: -5 }).pos, 0);
  assert.equal(run(s, { type: "go", to: 99 }).pos, 10);
  assert.equal(initial({ n: 10, step: 42 }).pos, 10);
  assert.equal(s.pos, 3, "the reducer never changes the state it is given");
});

test("autoplay ticks forward and stops at the end", () => {
  let s = run(initial({ n: 2 }), { type: "play", on: true });
  assert.ok(s.playing);
  s = run(s, { type: "tick" }, { type: "tick" });
  assert.equal(s.pos, 2);
  assert.ok(s.playing);
  s = run(s, { type: "tick" });
  assert.ok(!s.playing, "the tick at the end stops autoplay");
  s = run(s, { type: "play", on: true });
  assert.equal(s.pos, 0, "play at the end starts over");
});

test("predict stops playback at the question and a step cannot skip it", () => {
  let s = initial({ n: 10, predict: true, questions: [QUESTION] });
  s = run(s, { type: "play", on: true }, { type: "tick" }, { type: "tick" }, { type: "tick" }, { type: "tick" });
  assert.equal(s.pos, 4);
  assert.equal(s.asking, 0);
  assert.ok(!s.playing && s.resumePlay && held(s));
  assert.deepEqual(run(s, { type: "play", on: true }), s, "play is held by the question");
  assert.equal(run(initial({ n: 10, predict: true, questions: [QUESTION] }), { type: "go", to: 10 }).pos, 4, "End stops at it too");
  assert.equal(run(initial({ n: 10, questions: [QUESTION] }), { type: "go", to: 10 }).pos, 10, "not without predict");
});

test("a guess is judged, revealed step by step, and autoplay carries on", () => {
  let s = run(initial({ n: 10, step: 4, predict: true, questions: [QUESTION] }), { type: "askHere" });
  s = { ...s, resumePlay: true };
  s = run(s, { type: "guess", block: 2 });
  assert.deepEqual(s.answered[0], { guess: 2, right: false, text: "Not quite: you picked 2" });
  assert.equal(s.revealing, 0);
  assert.equal(run(s, { type: "go", to: 0 }).pos, 4, "no move while the reveal runs");
  s = run(s, { type: "revealStep" }, { type: "revealStep" }, { type: "revealStep" });
  assert.equal(s.pos, 7);
  assert.equal(predictPanel(s).kind, "verdict");
  assert.equal(predictPanel(s).done, false);
  s = run(s, { type: "revealStep" });
  assert.equal(s.revealing, null);
  assert.equal(predictPanel(s).done, true);
  s = run(s, { type: "carryOn" });
  assert.ok(s.playing && !s.resumePlay);
  assert.equal(predictPanel(run(s, { type: "go", to: 9 })).kind, "none-ahead");
});

test("going back before a question asks it again; switching predict off closes it", () => {
  let s = run(initial({ n: 10, step: 4, predict: true, questions: [QUESTION] }), { type: "askHere" },
    { type: "guess", block: 3 }, { type: "revealStep" }, { type: "revealStep" }, { type: "revealStep" }, { type: "revealStep" });
  assert.ok(s.answered[0].right);
  s = run(s, { type: "go", to: 2 });
  assert.deepEqual(s.answered, {});
  assert.equal(questionOnTheWay(s, 2, 6), 0);
  s = run(s, { type: "go", to: 6 });
  assert.equal(s.asking, 0);
  s = run(s, { type: "predict", on: false });
  assert.equal(s.asking, null);
  assert.equal(predictPanel(s).kind, "off");
  assert.equal(predictPanel(initial({ n: 3, predict: true })).kind, "never");
});

test("jumps go to the next target after the current position", () => {
  const s = initial({ n: 10, step: 5 });
  assert.equal(nextJump(s, [2, 5, 8]), 8);
  assert.equal(nextJump(s, [2, 5]), null);
  assert.equal(nextJump(s, undefined), null);
});
