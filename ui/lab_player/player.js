// PrefixLab's player: plays an engine's whole timeline in the browser (docs/player.md has the data).
// Streamlit sends every state once; stepping, scrubbing, autoplay and "predict the victim" are moves of
// one pure state (reducer.js), drawn by views.js. Only the timers and the talk with Streamlit live here.
// The step goes back to Streamlit (for the URL) only when playback rests.
import { held, initial, nextJump, predictPanel, reduce } from "./reducer.js";
import * as V from "./views.js";
import { height, onRender, ready, sendValue } from "./streamlit.js";

const $ = (id) => document.getElementById(id);
const JUMPS = ["eviction", "hit", "preemption"];
let A = null;            // the latest args (docs/player.md: PlayerArgs)
let S = initial();       // the playback state
let dataId = null, frames = [], shown = null, selected = null;
let timer = null, revealTimer = null, writeTimer = null, lastArgsStep = null, lastSent = null, nonce = 0;
let laidOutProjector = null;

const lab = () => A.mode === "lab";
const controlled = () => A.mode !== "view";  // the lesson's own buttons move a view-mode player

// ---------- one move: reduce, then the effects (timers, focus, the write back) and the drawing ----------
function dispatch(action, { fromUser = false } = {}) {
  const old = S;
  S = reduce(S, action);
  if (S.playing !== old.playing || action.type === "speed") restartTimer();
  if (S.revealing !== null && revealTimer === null) revealTimer = setTimeout(revealStep, 0);
  if (S.pos !== old.pos || S.asking !== old.asking || S.predict !== old.predict || S.answered !== old.answered) {
    show(Math.abs(S.pos - old.pos) === 1);
  } else { renderControls(); }
  if (S.asking !== null && old.asking === null) focus("#predict .choices button");
  if (old.playing && !S.playing && S.asking === null) scheduleWrite(0);  // playback rests: tell the URL
  else if (fromUser && S.asking === null && S.pos !== old.pos) scheduleWrite(S.playing ? null : 700);
}
function restartTimer() {
  clearInterval(timer); timer = null;
  if (S.playing) timer = setInterval(() => dispatch({ type: "tick" }), 1000 / Number($("speed").value));
}
function revealStep() {
  revealTimer = null;
  const before = S.revealing;
  dispatch({ type: "revealStep" });
  if (S.revealing !== null) revealTimer = setTimeout(revealStep, 550);
  else if (before !== null) { show(false); focus("#predict .continue"); }
}
function focus(sel) { const el = document.querySelector(sel); if (el) el.focus({ preventScroll: true }); }
function select(b) { selected = selected === b ? null : b; show(false); scheduleWrite(700); }

// ---------- drawing ----------
function show(animate) {
  const L = V.sizes(A.data.num_blocks, !!A.projector);
  const f = frames[S.pos];
  const look = { theme: A.theme, selected, touched: A.touched || f.touched, hideMarks: S.asking !== null };
  V.renderCard(f);
  V.renderPool(f, shown, animate, look);
  V.renderFlow(f, L, animate, look, select);
  V.renderHashes(f, shown, animate, selected);
  V.renderGroups(A.groups, A.theme);
  V.renderHost(A.host, A.theme);
  V.renderCompare(f, A.other ? A.other.data.frames[A.other.align[S.pos]] : null, L, A.labels, A.notes, A.theme);
  renderPredict();
  renderControls();
  V.renderLog(frames, S.pos);
  shown = f;
  document.body.dataset.pos = S.pos;
  height();
}
function renderControls() {
  const hold = held(S);
  $("start").disabled = $("back").disabled = S.revealing !== null || S.pos === 0;
  $("fwd").disabled = $("end").disabled = hold || S.pos >= S.n;
  $("play").disabled = hold;
  $("play").textContent = S.playing ? "⏸ Pause" : "▶ Play";
  $("scrub").max = S.n; $("scrub").value = S.pos; $("scrub").disabled = hold;
  for (const name of JUMPS) {
    const target = nextJump(S, A.data.jumps[name]);
    const b = $("j-" + name);
    b.disabled = hold || target === null;
    b.title = target === null ? `No ${name} ahead` : `Jump to just after the next ${name}`;
  }
}
// The panel under the controls, rebuilt only when its content changes (a key press keeps a choice's focus).
function setPredict(cls, html, wire) {
  const box = $("predict");
  box.hidden = false;
  if (box.className === cls && box.dataset.html === html) return;
  box.className = cls; box.innerHTML = html; box.dataset.html = html;
  if (wire) wire(box);
}
function renderPredict() {
  const panel = predictPanel(S), box = $("predict"), qs = S.questions, f = frames[S.pos];
  const head = '<b class="ph">Predict the victim.</b> ';
  if (panel.kind === "off") { box.hidden = true; box.innerHTML = ""; box.dataset.html = ""; return; }
  if (panel.kind === "asking") {
    const q = qs[panel.index];
    const picks = q.queue.map((b) => V.pickButton(b, V.freeState(f, b), A.theme)).join("");
    setPredict("predict asking", `<div>${head}${V.esc(q.text)}</div><div class="choices" role="group" ` +
      `aria-label="Your guess: a block in the free queue (head first)"><span class="hint">Free queue, head first:</span>${picks}</div>`,
      (el) => el.querySelectorAll(".pick").forEach((b) => { b.onclick = () => dispatch({ type: "guess", block: Number(b.dataset.block) }); }));
  } else if (panel.kind === "verdict") {
    const a = panel.answer;
    setPredict("predict " + (a.right ? "right" : "wrong"), `<div class="verdict">${a.right ? "✓" : "✗"} ${V.esc(a.text)}</div>` +
      (panel.done ? `<button type="button" class="continue">${S.resumePlay ? "Continue playing ▶" : "Continue ▶"}</button>` : ""),
      (el) => { const c = el.querySelector(".continue"); if (c) c.onclick = () => { dispatch({ type: "carryOn" }, { fromUser: true }); focus("#fwd"); }; });
  } else if (panel.kind === "ahead") {
    setPredict("predict", `${head}Playback stops before event ${qs[panel.index].ask_at + 1}, the next allocation that evicts ` +
      "a cached block: step or play to get there.");
  } else if (panel.kind === "none-ahead") {
    setPredict("predict", `${head}No allocation ahead of this point evicts a cached block. ` +
      '<button type="button" class="restart">Ask from the start</button>',
      (el) => { el.querySelector(".restart").onclick = () => dispatch({ type: "restart" }); });
  } else {
    setPredict("predict", `${head}This trace never evicts under this policy: try <i>Eviction pressure</i>, or vLLM 0.23 (classic).`);
  }
}

// ---------- back to Streamlit: the step for the URL, only when playback rests ----------
function scheduleWrite(delay) {
  clearTimeout(writeTimer);
  if (delay === null || !lab()) return;  // only the lab puts the step in its URL
  writeTimer = setTimeout(() => {
    lastArgsStep = S.pos;  // the rerun this causes echoes pos back: not a move to make
    lastSent = `${Date.now()}-${++nonce}`;
    sendValue({ step: S.pos, block: selected, nonce: lastSent });
  }, delay);
}

// ---------- keys: on the whole page, so they work after clicking a toggle ----------
function typing(t) {
  if (!t || !t.tagName) return false;
  const tag = t.tagName.toLowerCase();
  if (tag === "textarea" || tag === "select" || t.isContentEditable) return true;
  if (tag === "input") return !["checkbox", "radio", "button", "submit"].includes((t.type || "").toLowerCase());
  return t.getAttribute && (t.getAttribute("role") === "slider" || t.getAttribute("role") === "combobox");
}
// Space plays and pauses, unless the focus is on something Space already works (a button, a toggle, ...).
function interactive(t) {
  return !!(t && t.closest && t.closest("button, a, input, select, textarea, summary, [role=button], [role=switch], " +
    "[role=checkbox], [role=radio], [role=slider], [role=combobox], [role=option], [role=tab], [contenteditable=true]"));
}
function onKey(e) {
  if (!A || !controlled() || e.altKey || e.ctrlKey || e.metaKey || typing(e.target)) return;
  if (e.key === " " && !interactive(e.target)) {
    e.preventDefault(); e.stopPropagation();
    dispatch({ type: "play", on: !S.playing });
    return;
  }
  const to = { ArrowRight: S.pos + 1, ArrowLeft: S.pos - 1, Home: 0, End: S.n }[e.key];
  if (to !== undefined) {
    e.preventDefault(); e.stopPropagation();
    if (S.playing) dispatch({ type: "play", on: false });
    dispatch({ type: "go", to }, { fromUser: true });
  }
}
function bindKeys() {
  try {
    const doc = window.parent.document;
    if (window.parent.__prefixlabKeys) doc.removeEventListener("keydown", window.parent.__prefixlabKeys, true);
    window.parent.__prefixlabKeys = onKey;
    doc.addEventListener("keydown", onKey, true);
    window.addEventListener("unload", () => doc.removeEventListener("keydown", onKey, true));
  } catch (err) { /* another origin: keys work while the player has focus */ }
}

// ---------- wiring ----------
const move = (to) => () => dispatch({ type: "go", to: to() }, { fromUser: true });
$("start").onclick = move(() => 0);
$("back").onclick = move(() => S.pos - 1);
$("fwd").onclick = move(() => S.pos + 1);
$("end").onclick = move(() => S.n);
$("play").onclick = () => dispatch({ type: "play", on: !S.playing });
$("scrub").oninput = (e) => dispatch({ type: "go", to: Number(e.target.value) }, { fromUser: true });
$("speed").onchange = () => dispatch({ type: "speed" });
$("log").addEventListener("toggle", () => { V.renderLog(frames, S.pos); height(); });
for (const name of JUMPS) $("j-" + name).onclick = () => { const t = nextJump(S, A.data.jumps[name]); if (t !== null) dispatch({ type: "go", to: t }, { fromUser: true }); };

// Land on Forward when the lab opens (nothing else has focus): no Tab stops before it.
let focused = false;
function focusOnce() {
  if (focused || !lab()) return;
  focused = true;
  try {
    const active = window.parent.document.activeElement;
    if (active && active !== window.parent.document.body) return;
  } catch (err) { /* another origin */ }
  focus("#fwd");
}
// Projected, the legend and the event log sit under the free queue (the right column is the shorter
// one), so the lab with Compare or Predict still fits a 768 px screen; otherwise below everything.
function placeLegend(proj) {
  const home = proj ? document.querySelector("#stage .right") : $("player");
  if ($("legend").parentElement !== home) home.append($("legend"), $("log"));
}
let laidOutWidth = -1;
function layOut() {  // the width it was laid out for: a frame first drawn narrow (hidden, 300 px) re-lays out when it grows
  laidOutWidth = document.body.clientWidth;
  V.buildPool(V.sizes(A.data.num_blocks, !!A.projector), select); shown = null;
}

onRender((args) => {
  A = args;
  $("theme").textContent = A.theme.css;
  $("player").classList.toggle("projector", !!A.projector);
  $("player").dataset.mode = A.mode;
  $("player").classList.toggle("panels", !!(A.groups || A.host));  // a page of its own: the hash table grows
  document.body.classList.toggle("projector", !!A.projector);
  placeLegend(!!A.projector);
  V.renderLegend(A.theme, !!A.other);
  const predict = lab() && !!A.predict;
  if (A.data_id !== dataId) {  // a new timeline: start over
    dataId = A.data_id; frames = A.data.frames; selected = A.block;
    clearInterval(timer); timer = null; clearTimeout(revealTimer); revealTimer = null; clearTimeout(writeTimer);
    S = initial({ n: frames.length - 1, step: A.step, predict, questions: A.data.questions || [] });
    V.resetFlow(); laidOutProjector = A.projector; layOut(); lastArgsStep = A.step;
    show(false); focusOnce(); dispatch({ type: "askHere" });
    return;
  }
  if (predict !== S.predict) dispatch({ type: "predict", on: predict });  // the Streamlit toggle
  if (lastSent !== null && A.ack !== lastSent && controlled()) { renderControls(); height(); return; }  // an older echo
  if (A.projector !== laidOutProjector) { laidOutProjector = A.projector; layOut(); show(false); return; }
  if (A.step !== lastArgsStep) {
    lastArgsStep = A.step;
    if (A.step !== S.pos) { const animate = Math.abs(A.step - S.pos) === 1; S = { ...S, pos: Math.max(0, Math.min(S.n, A.step)) }; show(animate); }
    else show(false);  // a view's outline (touched) may change with the same step
  } else if (!controlled()) show(false);
  else { renderControls(); height(); }  // an echo of our own step: leave running transitions alone
});

// Re-lay out only when the width changes (the height follows the content on every step).
let resizeTimer = null;
window.addEventListener("resize", () => { clearTimeout(resizeTimer); resizeTimer = setTimeout(() => {
  if (!A || document.body.clientWidth === laidOutWidth) return;
  layOut(); show(false); }, 150); });
// test hooks: read-only view of the player for the browser tests
window.prefixlabPlayer = { get pos() { return S.pos; }, get playing() { return S.playing; }, get n() { return S.n; },
  get asking() { return S.asking; }, get questions() { return S.questions; }, get mode() { return A && A.mode; } };
document.addEventListener("keydown", onKey);
bindKeys();
ready();
