// The player's playback state as a pure reducer: reduce(state, action) -> a new state, no DOM, no timers.
// Stepping, scrubbing, autoplay and "predict the victim" are all moves of this one state; player.js
// draws it and runs the timers (autoplay ticks, the reveal's steps) by dispatching actions here.
// Tested on its own with node (tests/js/reducer.test.mjs).

/**
 * @typedef {{ask_at: number, reveal_at: number, answer: number, queue: number[], right: string, wrong: string}} Question
 * @typedef {{guess: number, right: boolean, text: string}} Answer
 * @typedef {Object} State
 * @property {number} pos          the state on screen: after `pos` events
 * @property {number} n            the last position (number of events)
 * @property {boolean} playing     autoplay runs
 * @property {boolean} predict     "predict the victim" is on
 * @property {Question[]} questions every question of the timeline, in order
 * @property {?number} asking      the question open now (index), or null
 * @property {Object<number, Answer>} answered guesses made, by question index
 * @property {?number} revealing   the question whose reveal is stepping through its allocation, or null
 * @property {boolean} resumePlay  autoplay was running when a question stopped it (Continue resumes it)
 */

/** The text a guess gets: the question's own verdict, the picked block written in. */
export const GUESS = "{guess}";

/** @returns {State} */
export function initial({ n = 0, step = 0, predict = false, questions = [] } = {}) {
  const s = { pos: 0, n, playing: false, predict, questions, asking: null, answered: {}, revealing: null, resumePlay: false };
  return { ...s, pos: clamp(s, step) };
}

const clamp = (s, p) => Math.max(0, Math.min(s.n, p));

/** A question or its reveal holds playback where it is. */
export const held = (s) => s.asking !== null || s.revealing !== null;

/** The first unanswered question met moving forward from p to t (its ask_at in [p, t]), or null. */
export function questionOnTheWay(s, p, t) {
  if (t < p) return null;
  const i = s.questions.findIndex((q, k) => q.ask_at >= p && q.ask_at <= t && !(k in s.answered));
  return i >= 0 ? i : null;
}

/** The next jump target after `pos` among `targets` (event positions), or null. */
export function nextJump(s, targets) {
  const t = (targets || []).find((i) => i > s.pos);
  return t === undefined ? null : t;
}

function forgetAnswersAfter(s, p) {
  const answered = {};
  for (const [k, a] of Object.entries(s.answered)) if (s.questions[k].ask_at <= p) answered[k] = a;
  return { ...s, answered };
}

function ask(s, i, target) {
  return { ...s, resumePlay: s.playing, playing: false, asking: i, pos: target };
}

function go(s, p) {
  if (s.revealing !== null) return s;  // the reveal is stepping through the allocation
  let target = clamp(s, p);
  const stop = s.predict ? questionOnTheWay(s, s.pos, target) : null;
  if (stop !== null) target = Math.min(target, s.questions[stop].ask_at);
  if (target < s.pos) s = forgetAnswersAfter(s, target);
  if (s.asking !== null && target !== s.pos) s = { ...s, asking: null };  // stepped back from the open question
  if (stop !== null && s.asking === null) return ask(s, stop, target);
  return { ...s, pos: target };
}

function askHere(s) {
  if (!s.predict || held(s)) return s;
  const i = s.questions.findIndex((q, k) => q.ask_at === s.pos && !(k in s.answered));
  return i >= 0 ? ask(s, i, s.pos) : s;
}

/**
 * @param {State} s
 * @param {{type: string, [k: string]: any}} a
 *   go {to}: move (stops at an unanswered question on the way) · play {on} · tick: one autoplay step ·
 *   guess {block} · revealStep: one step of the reveal · carryOn: after a reveal · predict {on} · askHere
 * @returns {State}
 */
export function reduce(s, a) {
  switch (a.type) {
    case "go": return go(s, a.to);
    case "play": {
      if (!a.on) return { ...s, playing: false };
      if (held(s)) return s;
      const from = s.pos >= s.n ? go(s, 0) : s;
      return from.asking !== null ? from : { ...from, playing: true };
    }
    case "tick": {
      if (!s.playing) return s;
      if (s.pos >= s.n) return { ...s, playing: false };
      return go(s, s.pos + 1);
    }
    case "guess": {
      if (s.asking === null) return s;
      const q = s.questions[s.asking], right = a.block === q.answer;
      const text = right ? q.right : q.wrong.split(GUESS).join(String(a.block));
      return { ...s, answered: { ...s.answered, [s.asking]: { guess: a.block, right, text } }, revealing: s.asking, asking: null };
    }
    case "revealStep": {
      if (s.revealing === null) return s;
      const q = s.questions[s.revealing];
      return s.pos < q.reveal_at ? { ...s, pos: s.pos + 1 } : { ...s, revealing: null };
    }
    case "carryOn": {
      if (held(s)) return s;
      if (s.resumePlay) return { ...s, resumePlay: false, playing: true };
      return go(s, s.pos + 1);
    }
    case "predict": {
      if (!!a.on === s.predict) return s;
      const t = { ...s, predict: !!a.on };
      return a.on ? askHere(t) : { ...t, asking: null, resumePlay: false };
    }
    case "askHere": return askHere(s);
    case "restart": return askHere({ ...forgetAnswersAfter(s, -1), pos: s.questions.length ? s.questions[0].ask_at : s.pos });
    default: return s;
  }
}

/**
 * What the predict panel says now: a question, a verdict, where the next question is, or that there is none.
 * @returns {{kind: "off"} | {kind: "asking", index: number} | {kind: "verdict", index: number, answer: Answer, done: boolean}
 *   | {kind: "ahead", index: number} | {kind: "none-ahead"} | {kind: "never"}}
 */
export function predictPanel(s) {
  if (!s.predict) return { kind: "off" };
  if (s.asking !== null) return { kind: "asking", index: s.asking };
  const shown = s.questions.findIndex((q, i) => i in s.answered && q.ask_at <= s.pos && s.pos <= q.reveal_at);
  if (shown >= 0) return { kind: "verdict", index: shown, answer: s.answered[shown], done: s.revealing === null };
  const ahead = s.questions.findIndex((q, i) => q.ask_at >= s.pos && !(i in s.answered));
  if (ahead >= 0) return { kind: "ahead", index: ahead };
  return s.questions.length ? { kind: "none-ahead" } : { kind: "never" };
}
