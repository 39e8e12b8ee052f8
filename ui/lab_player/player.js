// PrefixLab lab player: plays a scenario's whole timeline in the browser.
// Streamlit sends every state once (teaching.lab.playback); stepping, scrubbing and autoplay
// run here, with CSS transitions between consecutive states, and cost the server nothing.
// The step goes back to Streamlit (for the URL) only when playback pauses or stepping stops.
// Predict the victim runs here too: the questions and their answers come with the timeline
// (teaching.lab.predict_questions); playback stops at each one, and a guess costs no round trip.
// Talks to Streamlit with its component messages (componentReady / render / setComponentValue).
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const NARROW = 700;  // px: below this the stage stacks its two columns
  const send = (type, extra) => window.parent.postMessage(Object.assign({ isStreamlitMessage: true, type }, extra), "*");
  let A = null;          // the latest args from Streamlit
  let dataId = null;     // which timeline is loaded
  let pos = 0, n = 0, frames = [], playing = false, timer = null, selected = null;
  let lastArgsStep = null, writeTimer = null, nonce = 0, laidOutProjector = null, lastSent = null;
  const chips = new Map(), tiles = [], marks = [];
  // predict the victim: the question open now (index into A.data.questions), the guesses made, and
  // whether autoplay was running when the question stopped it (Continue resumes it)
  let asking = null, resumePlay = false, revealTimer = null, predictOn = false;
  const answered = new Map();
  let shown = null;      // the frame on screen (to animate the difference to the next)

  // ---------- geometry ----------
  function sizes() {
    const proj = A.projector;
    const width = document.body.clientWidth;
    const narrow = width < NARROW;  // one column: the grid gets the full width, the queue goes below it
    document.body.classList.toggle("narrow", narrow);
    const leftW = narrow ? width : (width - 14) * (1 / 2.15), rightW = narrow ? width : width - 14 - leftW;
    const nb = A.data.num_blocks;
    const cols = narrow ? Math.min(nb > 48 ? 16 : 8, Math.max(4, Math.ceil(nb / 2)))
      : Math.min(nb > 48 ? 16 : 8, Math.max(3, Math.ceil(Math.sqrt(nb * (proj ? 1.5 : 2)))));
    const gap = 6, tileW = Math.floor((leftW - gap * (cols - 1)) / cols);
    // projected tiles too narrow for a hash show two lines (id, ref): lower tiles keep the lab on one screen
    const tileH = proj ? (tileW >= 92 ? Math.min(86, Math.max(48, tileW * 0.72)) : 52) : Math.min(76, Math.max(40, tileW * 0.7));
    const chip = proj ? 48 : 40, labelW = proj ? 118 : 100;
    const perRow = Math.max(1, Math.floor((rightW - labelW + gap) / (chip + gap)));
    return { cols, gap, tileW, tileH, chip, labelW, perRow, rightW, proj };
  }

  // ---------- states and looks (from viz.theme) ----------
  function poolState(f, b) {
    if (b === 0) return "null";
    if (f.ref[b] > 0) return "in_use";
    return f.hash[b] !== null ? "cached_free" : "free";
  }
  function paint(el, state) {
    el.style.background = A.theme.fill_css[state];
    el.style.color = A.theme.text[state];
    el.dataset.state = state;
  }

  // ---------- pool grid ----------
  function buildPool(S) {
    const pool = $("pool"); pool.innerHTML = ""; tiles.length = 0;
    const nb = A.data.num_blocks, rows = Math.ceil(nb / S.cols);
    pool.style.height = (rows * (S.tileH + S.gap)) + "px";
    const showHash = S.tileW >= (S.proj ? 92 : 70);
    for (let b = 0; b < nb; b++) {
      const t = document.createElement("div");
      t.className = "tile"; t.dataset.block = b;
      t.style.width = S.tileW + "px"; t.style.height = S.tileH + "px";
      t.style.left = (b % S.cols) * (S.tileW + S.gap) + "px";
      t.style.top = Math.floor(b / S.cols) * (S.tileH + S.gap) + "px";
      t.innerHTML = `<span class="id"></span><span class="ref"></span>${showHash ? '<span class="hash"></span>' : ""}`;
      t.addEventListener("click", () => select(b));
      pool.appendChild(t); tiles.push(t);
    }
  }
  function renderPool(f, prev, animate) {
    const G = A.theme.glyph;
    tiles.forEach((t, b) => {
      const st = poolState(f, b);
      paint(t, st);
      t.querySelector(".id").textContent = b === 0 ? `0 ${G.null}` : `${b} ${G[st]}`;
      const ref = t.querySelector(".ref");
      ref.textContent = b === 0 ? "null" : `ref ${f.ref[b]}`;
      const h = t.querySelector(".hash");
      if (h) h.textContent = b === 0 ? "" : (f.hash[b] || A.theme.no_hash);
      t.title = `block ${b}: ${A.theme.label[st]}` + (b && f.hash[b] ? `, hash ${f.hash[b]}` : "");
      if (animate && prev && b) {
        if (prev.ref[b] !== f.ref[b]) restart(ref, "tick");
        if (h && f.hash[b] && prev.hash[b] !== f.hash[b]) restart(h, "fresh");
      }
      t.classList.toggle("touched", f.touched.includes(b));
      t.classList.toggle("selected", selected === b);
      if (animate && f.evicted.includes(b)) restart(t, "flash");
    });
    const used = A.data.num_blocks - 1 - f.fq.length;
    $("status").textContent = `· in use ${used}/${A.data.num_blocks - 1} · free ${f.fq.length} · cached ${f.hashes.length} · evictions ${f.evictions}`;
  }
  function restart(el, cls) { el.classList.remove(cls); void el.offsetWidth; el.classList.add(cls); }

  // ---------- free queue + block tables: chips that move ----------
  function layoutFlow(f, S) {
    const place = [];  // {key, block, state, x, y, from}
    const pitch = S.chip + S.gap;
    const qRows = Math.max(1, Math.ceil(f.fq.length / S.perRow));
    const markH = S.proj ? 20 : 16;
    f.fq.forEach((b, i) => place.push({ key: "b" + b, block: b, state: f.hash[b] !== null ? "cached_free" : "free",
      x: S.labelW + (i % S.perRow) * pitch, y: markH + Math.floor(i / S.perRow) * (pitch + markH) }));
    let y = markH + qRows * (pitch + markH) + 10;
    const rows = [];
    const seen = new Set();
    f.tables.forEach(([rid, status, ids, states]) => {
      const perRow = S.perRow;
      rows.push({ rid, status, y });
      ids.forEach((b, i) => {
        const key = seen.has(b) ? `b${b}@${rid}` : "b" + b;
        place.push({ key, block: b, state: states[i], x: S.labelW + (i % perRow) * pitch,
          y: y + Math.floor(i / perRow) * pitch, from: seen.has(b) ? "b" + b : null });
        seen.add(b);
      });
      y += Math.max(1, Math.ceil(ids.length / perRow)) * pitch + 4;
    });
    return { place, rows, height: Math.max(y, 2 * pitch), qRows, markH, pitch };
  }
  function renderFlow(f, S, animate) {
    const flow = $("flow");
    const L = layoutFlow(f, S);
    flow.style.height = L.height + "px";
    marks.forEach((m) => m.remove()); marks.length = 0;
    const label = (text, y, cls) => { const d = document.createElement("div"); d.className = cls || "rowlabel";
      d.innerHTML = text; d.style.top = y + "px"; flow.appendChild(d); marks.push(d); return d; };
    label("<b>free queue</b>", L.markH + S.chip / 2 - 10);
    if (!f.fq.length) label("<small>empty: the next allocation must wait</small>", L.markH + S.chip / 2 + 10);
    L.rows.forEach((r) => label(`${r.rid} <small>${r.status}</small>`, r.y + S.chip / 2 - 11));
    // the queue's marks (words from viz.free_queue.QUEUE_MARKS) above its head and its first cached block
    if (f.fq.length && asking === null) {  // while a question is open the marks would give its answer away
      const firstCached = f.fq.find((b) => f.hash[b] !== null);
      const head = f.fq[0];
      let taken = { row: -1, right: 0 };  // the previous mark, so two on one row never overlap
      const put = (b, text) => { const i = f.fq.indexOf(b);
        const row = Math.floor(i / S.perRow);
        const m = label(text, row * (L.pitch + L.markH), "mark");
        let left = S.labelW + (i % S.perRow) * L.pitch;  // over its block, but never past the panel's edge
        if (row === taken.row) left = Math.max(left, taken.right + 6);
        left = Math.max(0, Math.min(left, flow.clientWidth - m.offsetWidth));
        m.style.left = left + "px";
        taken = { row, right: left + m.offsetWidth }; };
      const W = A.theme.marks;
      if (firstCached === head) put(head, W.both + " ▼");
      else { put(head, W.reused + " ▼"); if (firstCached !== undefined) put(firstCached, W.evicted + " ▼"); }
    }
    const keys = new Set();
    const where = new Map();
    L.place.forEach((p) => where.set(p.key, p));
    L.place.forEach((p) => {
      keys.add(p.key);
      let c = chips.get(p.key);
      const fresh = !c;
      if (fresh) {
        c = document.createElement("div"); c.className = "chip"; c.dataset.key = p.key;
        c.style.width = c.style.height = S.chip + "px";
        c.addEventListener("click", () => select(Number(c.dataset.block)));
        flow.appendChild(c); chips.set(p.key, c);
        const origin = p.from && chips.get(p.from);
        if (animate && origin) { c.style.transition = "none"; c.style.transform = origin.style.transform; }
        else { c.style.transition = "none"; c.style.opacity = "0"; c.style.transform = `translate(${p.x}px, ${p.y}px)`; }
        void c.offsetWidth; c.style.transition = "";
      }
      c.dataset.block = p.block;
      c.textContent = `${p.block}${A.theme.glyph[p.state]}`;
      c.title = `block ${p.block}: ${A.theme.label[p.state]}`;
      paint(c, p.state);
      c.style.opacity = "1";
      c.style.transform = `translate(${p.x}px, ${p.y}px)`;
      c.classList.toggle("touched", f.touched.includes(p.block));
      c.classList.toggle("selected", selected === p.block);
      if (!animate) { c.style.transition = "none"; void c.offsetWidth; c.style.transition = ""; }
    });
    chips.forEach((c, key) => { if (!keys.has(key)) { c.style.opacity = "0"; chips.delete(key); setTimeout(() => c.remove(), 500); } });
  }

  // ---------- hash table ----------
  function renderHashes(f, prev, animate) {
    const old = new Set(prev ? prev.hashes.map((r) => r[0]) : []);
    if (!f.hashes.length) { $("hashes").innerHTML = '<div class="empty">no block is cached yet</div>'; return; }
    const rows = f.hashes.map(([h, ids, toks]) => {
      const cls = [(animate && !old.has(h)) ? "fresh" : "", ids.includes(selected) ? "sel" : ""].join(" ");
      const dup = ids.length > 1 ? ` (lookups use ${ids[0]})` : "";
      return `<tr class="${cls}"><td class="h">${h}</td><td>${ids.join(", ")}${dup}</td><td>${esc(toks)}</td></tr>`;
    });
    $("hashes").innerHTML = `<table><colgroup><col style="width:6.6em"><col style="width:4.6em"><col></colgroup>` +
      `<tr><th>hash</th><th>blocks</th><th>tokens</th></tr>${rows.join("")}</table>`;
    $("hashes").querySelectorAll("td:last-child").forEach((td) => { td.title = td.textContent; });
  }
  function esc(s) { return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c])); }

  // ---------- compare: two free queues side by side ----------
  function renderCompare(S) {
    const box = $("compare");
    if (!A.other) { box.hidden = true; return; }
    box.hidden = false;
    const mine = frames[pos], theirs = A.other.data.frames[A.other.align[pos]];
    const side = (f, other, label, note) => {
      const items = f.fq.map((b, i) => {
        const st = f.hash[b] !== null ? "cached_free" : "free";
        const diff = other.fq[i] !== b ? " differs" : "";
        return `<span class="chip${diff}" style="position:static;display:inline-flex;width:${S.chip}px;height:${S.chip}px;` +
          `margin:3px;background:${A.theme.fill_css[st]};color:${A.theme.text[st]}" title="block ${b}">${b}${A.theme.glyph[st]}</span>`;
      }).join("");
      return `<div><div class="ptitle">${esc(label)} <small>${esc(note)}</small></div><div>${items || "<i>empty</i>"}</div></div>`;
    };
    const diffs = mine.fq.filter((b, i) => theirs.fq[i] !== b).length + Math.max(0, theirs.fq.length - mine.fq.length);
    box.innerHTML = `<div class="ptitle">Free queues side by side: ${diffs} position(s) differ (dotted outline)</div>` +
      `<div style="display:grid;grid-template-columns:1fr 1fr;gap:14px">` +
      side(mine, theirs, A.labels[0], A.notes[0]) + side(theirs, mine, A.labels[1], A.notes[1]) + "</div>";
  }

  // ---------- event log: the events around the current one ----------
  function renderLog() {
    if (!$("log").open) return;
    const lines = [];
    for (let i = Math.max(1, pos - 8); i <= Math.min(n, pos + 3); i++) {
      const c = frames[i].card;
      lines.push(`<li class="${i === pos ? "now" : i > pos ? "later" : ""}"><span class="n">${i}</span>` +
        `<span class="tag">${esc(c.tag)}</span> ${esc(c.body)}</li>`);
    }
    $("log-lines").innerHTML = lines.join("") || "<li>Nothing has happened yet.</li>";
  }

  // ---------- card, controls ----------
  function renderCard(f) {
    const c = f.card;
    $("card").innerHTML = `<div class="head">${esc(c.head)}</div><span class="tag">${esc(c.tag)}</span>${esc(c.body)}` +
      (c.note ? `<br><i>Note: ${esc(c.note)}</i>` : "");
  }
  function renderControls() {
    const held = asking !== null || revealTimer !== null;  // a question (or its reveal) holds playback here
    $("start").disabled = $("back").disabled = revealTimer !== null || pos === 0;
    $("fwd").disabled = $("end").disabled = held || pos >= n;
    $("play").disabled = held;
    $("play").textContent = playing ? "⏸ Pause" : "▶ Play";
    $("scrub").max = n; $("scrub").value = pos; $("scrub").disabled = held;
    for (const name of ["eviction", "hit", "preemption"]) {
      const target = nextJump(name);
      const b = $("j-" + name);
      b.disabled = held || target === null;
      b.title = target === null ? `No ${name} ahead` : `Jump to just after the next ${name}`;
    }
  }
  function nextJump(name) { const t = (A.data.jumps[name] || []).find((i) => i > pos); return t === undefined ? null : t; }

  function show(p, animate) {
    pos = Math.max(0, Math.min(n, p));
    const S = sizes();
    const f = frames[pos];
    renderCard(f);
    renderPool(f, shown, animate);
    renderFlow(f, S, animate);
    renderHashes(f, shown, animate);
    renderCompare(S);
    renderPredict();
    renderControls();
    renderLog();
    shown = f;
    document.body.dataset.pos = pos;
    height();
  }
  function go(p, fromUser) {
    if (revealTimer !== null) return;  // the reveal is stepping through the allocation
    let target = Math.max(0, Math.min(n, p));
    const stop = A.predict ? questionOnTheWay(pos, target) : null;
    if (stop !== null) target = Math.min(target, questions()[stop].ask_at);
    if (target < pos) forgetAnswersAfter(target);
    if (asking !== null && target !== pos) asking = null;  // stepped back from the open question
    const animate = Math.abs(target - pos) === 1;
    if (stop !== null && asking === null) { ask(stop, target, animate); return; }
    show(target, animate);
    if (fromUser && asking === null) scheduleWrite(playing ? null : 700);
  }
  function select(b) { selected = selected === b ? null : b; show(pos, false); scheduleWrite(700); }

  // ---------- predict the victim: asked, answered and revealed here, no server round trip ----------
  function questions() { return (A && A.data.questions) || []; }
  // The first unanswered question met moving forward from p to t (its ask_at in [p, t]), or null.
  function questionOnTheWay(p, t) {
    if (t < p) return null;
    const qs = questions();
    for (let i = 0; i < qs.length; i++) {
      if (qs[i].ask_at >= p && qs[i].ask_at <= t && !answered.has(i)) return i;
    }
    return null;
  }
  // Going back before a question's moment asks it again next time.
  function forgetAnswersAfter(p) { questions().forEach((q, i) => { if (q.ask_at > p) answered.delete(i); }); }
  function ask(i, target, animate) {
    if (playing) { resumePlay = true; clearInterval(timer); timer = null; playing = false; } else resumePlay = false;
    asking = i;
    show(target, animate);
    const first = document.querySelector("#predict .choices button");
    if (first) first.focus({ preventScroll: true });
  }
  // Opened (or switched on) right at a question's moment, e.g. from a shared URL: ask it now.
  function askHere() {
    if (!A.predict || asking !== null || revealTimer !== null) return;
    const i = questions().findIndex((q, k) => q.ask_at === pos && !answered.has(k));
    if (i >= 0) ask(i, pos, false);
  }
  function guess(b) {
    const i = asking, q = questions()[i], right = b === q.answer;
    answered.set(i, { guess: b, right, text: right ? q.right : q.wrong.split("{guess}").join(String(b)) });
    asking = null;
    // Step through the allocation and its evictions, animated, to the state that shows the answer.
    const next = () => {
      if (pos < q.reveal_at) { show(pos + 1, true); revealTimer = setTimeout(next, 550); return; }
      revealTimer = null; show(pos, false);
      const btn = document.querySelector("#predict .continue");
      if (btn) btn.focus({ preventScroll: true });
    };
    revealTimer = setTimeout(next, 0);
    renderPredict(); renderControls(); height();
  }
  function carryOn() {  // after a reveal: autoplay goes on if a question had stopped it, else one step
    const resume = resumePlay; resumePlay = false;
    if (resume) setPlaying(true); else go(pos + 1, true);
    $("fwd").focus({ preventScroll: true });
  }
  function chipButton(b, state) {
    return `<button type="button" class="pick" data-block="${b}" style="background:${A.theme.fill_css[state]};` +
      `color:${A.theme.text[state]}" title="block ${b}: ${esc(A.theme.label[state])}">${b}${A.theme.glyph[state]}</button>`;
  }
  // The panel under the controls: the question, the verdict after a guess, or where the next question is.
  // Rebuilt only when its content changes, so a key press does not take the focus off a choice.
  function setPredict(cls, html, wire) {
    const box = $("predict");
    box.hidden = false;
    if (box.className === cls && box.dataset.html === html) return;
    box.className = cls; box.innerHTML = html; box.dataset.html = html;
    if (wire) wire(box);
  }
  function renderPredict() {
    const box = $("predict");
    if (!A.predict) { box.hidden = true; box.innerHTML = ""; box.dataset.html = ""; return; }
    const qs = questions(), f = frames[pos];
    const head = '<b class="ph">Predict the victim.</b> ';
    if (asking !== null) {
      const q = qs[asking];
      const picks = q.queue.map((b) => chipButton(b, f.hash[b] !== null ? "cached_free" : "free")).join("");
      setPredict("predict asking", `<div>${head}${esc(q.text)}</div><div class="choices" role="group" ` +
        `aria-label="Your guess: a block in the free queue (head first)"><span class="hint">Free queue, head first:</span>${picks}</div>`,
        (el) => el.querySelectorAll(".pick").forEach((b) => { b.onclick = () => guess(Number(b.dataset.block)); }));
      return;
    }
    const shownQ = qs.findIndex((q, i) => answered.has(i) && q.ask_at <= pos && pos <= q.reveal_at);
    if (shownQ >= 0) {
      const a = answered.get(shownQ);
      const done = revealTimer === null;
      setPredict("predict " + (a.right ? "right" : "wrong"), `<div class="verdict">${a.right ? "✓" : "✗"} ${esc(a.text)}</div>` +
        (done ? `<button type="button" class="continue">${resumePlay ? "Continue playing ▶" : "Continue ▶"}</button>` : ""),
        (el) => { const c = el.querySelector(".continue"); if (c) c.onclick = carryOn; });
      return;
    }
    const ahead = qs.findIndex((q, i) => q.ask_at >= pos && !answered.has(i));
    if (ahead >= 0) {
      setPredict("predict", `${head}Playback stops before event ${qs[ahead].ask_at + 1}, the next allocation that evicts ` +
        "a cached block: step or play to get there.");
    } else if (qs.length) {
      setPredict("predict", `${head}No allocation ahead of this point evicts a cached block. ` +
        '<button type="button" class="restart">Ask from the start</button>',
        (el) => { el.querySelector(".restart").onclick = () => { forgetAnswersAfter(-1); ask(0, qs[0].ask_at, false); }; });
    } else {
      setPredict("predict", `${head}This trace never evicts under this policy: try <i>Eviction pressure</i>, or vLLM 0.23 (classic).`);
    }
  }

  // ---------- autoplay (browser only) ----------
  function setPlaying(on) {
    playing = on;
    clearInterval(timer); timer = null;
    if (on) {
      if (pos >= n) go(0, false);
      timer = setInterval(() => { if (pos >= n) { setPlaying(false); return; } go(pos + 1, false); },
        1000 / Number($("speed").value));
    } else scheduleWrite(0);
    renderControls();
  }

  // ---------- back to Streamlit: the step for the URL, only when playback rests ----------
  function scheduleWrite(delay) {
    clearTimeout(writeTimer);
    if (delay === null) return;
    writeTimer = setTimeout(() => {
      lastArgsStep = pos;  // the rerun this causes echoes pos back: not a move to make
      lastSent = `${Date.now()}-${++nonce}`;
      send("streamlit:setComponentValue", { value: { step: pos, block: selected, nonce: lastSent }, dataType: "json" });
    }, delay);
  }
  // Projected, the legend and the event log sit under the free queue (the right column is the shorter
  // one), so the lab with Compare or Predict still fits a 768 px screen; otherwise below everything.
  function placeLegend(proj) {
    const home = proj ? document.querySelector("#stage .right") : $("player");
    if ($("legend").parentElement !== home) home.append($("legend"), $("log"));
  }
  function height() { send("streamlit:setFrameHeight", { height: Math.ceil(document.getElementById("player").scrollHeight + 4) }); }

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
    if (!A || e.altKey || e.ctrlKey || e.metaKey || typing(e.target)) return;
    if (e.key === " " && !interactive(e.target)) {
      e.preventDefault(); e.stopPropagation();
      if (asking === null && revealTimer === null) setPlaying(!playing);
      return;
    }
    const k = { ArrowRight: () => go(pos + 1, true), ArrowLeft: () => go(pos - 1, true),
      Home: () => go(0, true), End: () => go(n, true) }[e.key];
    if (k) { e.preventDefault(); e.stopPropagation(); if (playing) setPlaying(false); k(); }
  }
  function bindKeys() {
    document.addEventListener("keydown", onKey);
    try {
      const doc = window.parent.document;
      if (window.parent.__prefixlabKeys) doc.removeEventListener("keydown", window.parent.__prefixlabKeys, true);
      window.parent.__prefixlabKeys = onKey;
      doc.addEventListener("keydown", onKey, true);
      window.addEventListener("unload", () => doc.removeEventListener("keydown", onKey, true));
    } catch (err) { /* another origin: keys work while the player has focus */ }
  }

  // ---------- wiring ----------
  $("start").onclick = () => go(0, true);
  $("back").onclick = () => go(pos - 1, true);
  $("fwd").onclick = () => go(pos + 1, true);
  $("end").onclick = () => go(n, true);
  $("play").onclick = () => setPlaying(!playing);
  $("log").addEventListener("toggle", () => { renderLog(); height(); });
  $("scrub").oninput = (e) => go(Number(e.target.value), true);
  $("speed").onchange = () => { if (playing) setPlaying(true); };
  for (const name of ["eviction", "hit", "preemption"]) $("j-" + name).onclick = () => { const t = nextJump(name); if (t !== null) go(t, true); };

  function legend() {
    const T = A.theme;
    const states = T.legend_states.map((s) => `<span class="chipl"><span class="sw" style="background:${T.fill_css[s]};color:${T.text[s]}">${T.glyph[s]}</span>${esc(T.label[s])}</span>`);
    const outs = Object.entries(T.outline_css).map(([k, css]) => `<span class="chipl"><span class="sw" style="outline:${css};border:none;background:white;margin:0 9px 0 4px;width:14px;height:14px"></span>${esc(T.outline_label[k])}</span>`);
    $("legend").innerHTML = states.concat(A.other ? outs : outs.slice(0, 2)).join("");
  }
  // Land on Forward when the lab opens (nothing else has focus): no Tab stops before it.
  let focused = false;
  function focusOnce() {
    if (focused) return;
    focused = true;
    try {
      const active = window.parent.document.activeElement;
      if (active && active !== window.parent.document.body) return;
    } catch (err) { /* another origin */ }
    $("fwd").focus({ preventScroll: true });
  }
  function onRender(args) {
    A = args;
    const root = document.documentElement.style;
    root.setProperty("--plain", A.theme.plain); root.setProperty("--evicted", A.theme.fill.evicted);
    root.setProperty("--evicted-text", A.theme.text.evicted);
    root.setProperty("--touched", A.theme.outline_css.touched); root.setProperty("--selected", A.theme.outline_css.selected);
    root.setProperty("--selected-row", A.theme.selected_row);
    root.setProperty("--differs", A.theme.outline_css.differs);
    document.body.classList.toggle("projector", !!A.projector);
    $("player").classList.toggle("projector", !!A.projector);
    placeLegend(!!A.projector);
    if (A.data_id !== dataId) {
      dataId = A.data_id; frames = A.data.frames; n = frames.length - 1; shown = null;
      chips.forEach((c) => c.remove()); chips.clear(); selected = A.block;
      answered.clear(); asking = null; resumePlay = false; clearTimeout(revealTimer); revealTimer = null;
      predictOn = !!A.predict;
      setPlaying(false); clearTimeout(writeTimer);
      laidOutProjector = A.projector; buildPool(sizes()); lastArgsStep = A.step; show(A.step, false);
      focusOnce(); askHere();
      return;
    }
    legend();
    if (!!A.predict !== predictOn) {  // the Streamlit toggle: on asks from here on, off closes a question
      predictOn = !!A.predict;
      if (!predictOn) { asking = null; resumePlay = false; }
      show(pos, false); askHere();
    }
    if (lastSent !== null && A.ack !== lastSent) { renderControls(); height(); return; }  // an older echo: ours is on its way
    if (A.projector !== laidOutProjector) {  // type size changed: lay the tiles out again
      laidOutProjector = A.projector; buildPool(sizes()); shown = null; show(pos, false); return;
    }
    if (A.step !== lastArgsStep) { lastArgsStep = A.step; if (A.step !== pos) show(A.step, Math.abs(A.step - pos) === 1); }
    else { renderControls(); height(); }  // an echo of our own step: leave running transitions alone
  }
  window.addEventListener("message", (e) => {
    if (e.data && e.data.type === "streamlit:render") onRender(e.data.args);
  });
  // Re-lay out only when the width changes (the height follows the content on every step).
  let resizeTimer = null, laidOutWidth = document.body.clientWidth;
  window.addEventListener("resize", () => { clearTimeout(resizeTimer); resizeTimer = setTimeout(() => {
    if (!A || document.body.clientWidth === laidOutWidth) return;
    laidOutWidth = document.body.clientWidth;
    buildPool(sizes()); shown = null; show(pos, false); }, 150); });
  // test hooks: read-only view of the player for the browser tests
  window.prefixlabPlayer = { get pos() { return pos; }, get playing() { return playing; }, get n() { return n; },
    get asking() { return asking; }, get questions() { return questions(); } };
  bindKeys();
  send("streamlit:componentReady", { apiVersion: 1 });
})();
