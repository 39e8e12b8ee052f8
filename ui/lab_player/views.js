// The player's pictures, drawn from one frame (docs/player.md: Frame) and the theme. No playback state
// lives here: each function gets the frame to draw, the previous one (to animate the difference) and
// the look. Colours come from the generated stylesheet: an element with data-state="..." is painted.

const $ = (id) => document.getElementById(id);
const NARROW = 700;  // px: below this the stage stacks its two columns
const tiles = [], marks = [], chips = new Map();

export function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}
function restart(el, cls) { el.classList.remove(cls); void el.offsetWidth; el.classList.add(cls); }
const freeState = (f, b) => (f.hash[b] !== null ? "cached_free" : "free");
function poolState(f, b) {
  if (b === 0) return "null";
  if (f.ref[b] > 0) return "in_use";
  return freeState(f, b);
}

// ---------- geometry ----------
export function sizes(numBlocks, projector) {
  const width = document.body.clientWidth;
  const narrow = width < NARROW;  // one column: the grid gets the full width, the queue goes below it
  document.body.classList.toggle("narrow", narrow);
  const leftW = narrow ? width : (width - 14) * (1 / 2.15), rightW = narrow ? width : width - 14 - leftW;
  const nb = numBlocks;
  const cols = narrow ? Math.min(nb > 48 ? 16 : 8, Math.max(4, Math.ceil(nb / 2)))
    : Math.min(nb > 48 ? 16 : 8, Math.max(3, Math.ceil(Math.sqrt(nb * (projector ? 1.5 : 2)))));
  const gap = 6, tileW = Math.floor((leftW - gap * (cols - 1)) / cols);
  // projected tiles too narrow for a hash show two lines (id, ref): lower tiles keep the lab on one screen
  const tileH = projector ? (tileW >= 92 ? Math.min(86, Math.max(48, tileW * 0.72)) : 52) : Math.min(76, Math.max(40, tileW * 0.7));
  const chip = projector ? 48 : 40, labelW = projector ? 118 : 100;
  const perRow = Math.max(1, Math.floor((rightW - labelW + gap) / (chip + gap)));
  return { cols, gap, tileW, tileH, chip, labelW, perRow, rightW, proj: projector, numBlocks };
}

// ---------- pool grid ----------
export function buildPool(S, onSelect) {
  const pool = $("pool"); pool.innerHTML = ""; tiles.length = 0;
  const rows = Math.ceil(S.numBlocks / S.cols);
  pool.style.height = (rows * (S.tileH + S.gap)) + "px";
  const showHash = S.tileW >= (S.proj ? 92 : 70);
  for (let b = 0; b < S.numBlocks; b++) {
    const t = document.createElement("div");
    t.className = "tile"; t.dataset.block = b;
    t.style.width = S.tileW + "px"; t.style.height = S.tileH + "px";
    t.style.left = (b % S.cols) * (S.tileW + S.gap) + "px";
    t.style.top = Math.floor(b / S.cols) * (S.tileH + S.gap) + "px";
    t.innerHTML = `<span class="id"></span><span class="ref"></span>${showHash ? '<span class="hash"></span>' : ""}`;
    t.addEventListener("click", () => onSelect(b));
    pool.appendChild(t); tiles.push(t);
  }
}
export function renderPool(f, prev, animate, look) {
  const { theme: T, touched, selected } = look;
  tiles.forEach((t, b) => {
    const st = poolState(f, b);
    t.dataset.state = st;
    t.querySelector(".id").textContent = b === 0 ? `0 ${T.glyph.null}` : `${b} ${T.glyph[st]}`;
    const ref = t.querySelector(".ref");
    ref.textContent = b === 0 ? "null" : `ref ${f.ref[b]}`;
    const h = t.querySelector(".hash");
    if (h) h.textContent = b === 0 ? "" : (f.hash[b] || T.no_hash);
    t.title = `block ${b}: ${T.label[st]}` + (b && f.hash[b] ? `, hash ${f.hash[b]}` : "");
    if (animate && prev && b) {
      if (prev.ref[b] !== f.ref[b]) restart(ref, "tick");
      if (h && f.hash[b] && prev.hash[b] !== f.hash[b]) restart(h, "fresh");
    }
    t.classList.toggle("touched", touched.includes(b));
    t.classList.toggle("selected", selected === b);
    if (animate && f.evicted.includes(b)) restart(t, "flash");
  });
  const nb = tiles.length;
  $("status").textContent = `· in use ${nb - 1 - f.fq.length}/${nb - 1} · free ${f.fq.length} · cached ${f.hashes.length} · evictions ${f.evictions}`;
}

// ---------- free queue + block tables: chips that move ----------
function layoutFlow(f, S) {
  const place = [];  // {key, block, state, x, y, from}
  const pitch = S.chip + S.gap;
  const qRows = Math.max(1, Math.ceil(f.fq.length / S.perRow));
  const markH = S.proj ? 20 : 16;
  f.fq.forEach((b, i) => place.push({ key: "b" + b, block: b, state: freeState(f, b),
    x: S.labelW + (i % S.perRow) * pitch, y: markH + Math.floor(i / S.perRow) * (pitch + markH) }));
  let y = markH + qRows * (pitch + markH) + 10;
  const rows = [], seen = new Set();
  f.tables.forEach(([rid, status, ids, states]) => {
    rows.push({ rid, status, y });
    ids.forEach((b, i) => {
      const key = seen.has(b) ? `b${b}@${rid}` : "b" + b;
      place.push({ key, block: b, state: states[i], x: S.labelW + (i % S.perRow) * pitch,
        y: y + Math.floor(i / S.perRow) * pitch, from: seen.has(b) ? "b" + b : null });
      seen.add(b);
    });
    y += Math.max(1, Math.ceil(ids.length / S.perRow)) * pitch + 4;
  });
  return { place, rows, height: Math.max(y, 2 * pitch), markH, pitch };
}
export function resetFlow() { chips.forEach((c) => c.remove()); chips.clear(); }
export function renderFlow(f, S, animate, look, onSelect) {
  const { theme: T, touched, selected, hideMarks } = look;
  const flow = $("flow");
  const L = layoutFlow(f, S);
  flow.style.height = L.height + "px";
  marks.forEach((m) => m.remove()); marks.length = 0;
  const label = (text, y, cls) => { const d = document.createElement("div"); d.className = cls || "rowlabel";
    d.innerHTML = text; d.style.top = y + "px"; flow.appendChild(d); marks.push(d); return d; };
  label("<b>free queue</b>", L.markH + S.chip / 2 - 10);
  if (!f.fq.length) label("<small>empty: the next allocation must wait</small>", L.markH + S.chip / 2 + 10);
  L.rows.forEach((r) => label(`${esc(r.rid)} <small>${esc(r.status)}</small>`, r.y + S.chip / 2 - 11));
  // the queue's marks (words from viz.free_queue.QUEUE_MARKS) above its head and its first cached block
  if (f.fq.length && !hideMarks) {  // while a question is open the marks would give its answer away
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
    const W = T.marks;
    if (firstCached === head) put(head, W.both + " ▼");
    else { put(head, W.reused + " ▼"); if (firstCached !== undefined) put(firstCached, W.evicted + " ▼"); }
  }
  const keys = new Set();
  L.place.forEach((p) => {
    keys.add(p.key);
    let c = chips.get(p.key);
    if (!c) {
      c = document.createElement("div"); c.className = "chip"; c.dataset.key = p.key;
      c.style.width = c.style.height = S.chip + "px";
      c.addEventListener("click", () => onSelect(Number(c.dataset.block)));
      flow.appendChild(c); chips.set(p.key, c);
      const origin = p.from && chips.get(p.from);
      if (animate && origin) { c.style.transition = "none"; c.style.transform = origin.style.transform; }
      else { c.style.transition = "none"; c.style.opacity = "0"; c.style.transform = `translate(${p.x}px, ${p.y}px)`; }
      void c.offsetWidth; c.style.transition = "";
    }
    c.dataset.block = p.block;
    c.dataset.state = p.state;
    c.textContent = `${p.block}${T.glyph[p.state]}`;
    c.title = `block ${p.block}: ${T.label[p.state]}`;
    c.style.opacity = "1";
    c.style.transform = `translate(${p.x}px, ${p.y}px)`;
    c.classList.toggle("touched", touched.includes(p.block));
    c.classList.toggle("selected", selected === p.block);
    if (!animate) { c.style.transition = "none"; void c.offsetWidth; c.style.transition = ""; }
  });
  chips.forEach((c, key) => { if (!keys.has(key)) { c.style.opacity = "0"; chips.delete(key); setTimeout(() => c.remove(), 500); } });
}

// ---------- hash table ----------
export function renderHashes(f, prev, animate, selected) {
  const old = new Set(prev ? prev.hashes.map((r) => r[0]) : []);
  if (!f.hashes.length) { $("hashes").innerHTML = '<div class="empty">no block is cached yet</div>'; return; }
  const rows = f.hashes.map(([h, ids, toks]) => {
    const cls = [(animate && !old.has(h)) ? "fresh" : "", ids.includes(selected) ? "sel" : ""].join(" ");
    const dup = ids.length > 1 ? ` (lookups use ${ids[0]})` : "";
    return `<tr class="${cls}"><td class="h">${esc(h)}</td><td>${ids.join(", ")}${dup}</td><td title="${esc(toks)}">${esc(toks)}</td></tr>`;
  });
  $("hashes").innerHTML = `<table><colgroup><col style="width:6.6em"><col style="width:4.6em"><col></colgroup>` +
    `<tr><th>hash</th><th>blocks</th><th>tokens</th></tr>${rows.join("")}</table>`;
}

// ---------- a hybrid model's KV cache groups: one block table per group, per-group hits ----------
export function renderGroups(G, T) {
  const box = $("groups");
  if (!G) { box.hidden = true; box.innerHTML = ""; return; }
  box.hidden = false;
  const chip = (b) => b === null
    ? `<span class="chip static null" data-state="null" title="released by the window: the null block stands here">${T.glyph.null}</span>`
    : `<span class="chip static" data-state="in_use" title="block ${b}">${b}</span>`;
  const tables = G.tables.map((g) => {
    const rows = g.rows.map(([rid, ids]) => `<tr><th>${esc(rid)}</th><td>${ids.map(chip).join("")}</td></tr>`).join("");
    const body = rows ? `<table class="gtable">${rows}</table>` : '<p class="note">No live request holds blocks in this group.</p>';
    const released = g.sliding ? `<p class="note released">Released by the window so far: ${esc(g.released.join(", ") || "none yet")}</p>` : "";
    return `<h4 data-group="${g.group_idx}">${esc(g.title)}</h4>${body}${released}`;
  }).join("");
  let hits = "";
  if (G.hits.length) {
    const head = G.tables.map((g) => `<th>group ${g.group_idx} alone</th>`).join("");
    const rows = G.hits.map(([rid, prompt, per, agreed]) => `<tr><th>${esc(rid)}</th><td>${prompt}</td>` +
      per.map((t) => `<td class="${t > agreed ? "cut" : ""}">${t}</td>`).join("") + `<td><b>${agreed}</b></td></tr>`).join("");
    hits = `<h4>If each prompt came again now: cached tokens</h4><table class="hits"><tr><th>request</th><th>prompt</th>${head}` +
      `<th>all groups</th></tr>${rows}</table><p class="note"><span class="cut">Marked</span>: a hit this group allows that another group does not.</p>`;
  }
  box.innerHTML = `<div class="ptitle">KV cache groups: one block table per group</div>${tables}${hits}` +
    `<p class="note">${G.num_free_blocks} blocks in the free queue, shared by all groups.</p>`;
}

// ---------- the host tier (CPU) under the device pool ----------
export function renderHost(H, T) {
  const box = $("host");
  if (!H) { box.hidden = true; box.innerHTML = ""; return; }
  box.hidden = false;
  const blocks = H.blocks.map(([words, stored]) => `<span class="hblock${stored ? " stored" : ""}" data-state="cached_free"` +
    ` title="${stored ? "just spilled here" : "a copy in host memory"}">${esc(words)}</span>`).join("");
  box.innerHTML = `<div class="ptitle">Host tier (CPU), ${H.blocks.length} blocks <small>outlined: just spilled</small></div>` +
    `<div class="hrow">${blocks || '<span class="empty">empty</span>'}</div>` + H.notes.map((n) => `<p class="note">${esc(n)}</p>`).join("");
}

// ---------- compare: two free queues side by side ----------
export function renderCompare(mine, theirs, S, labels, notes, T) {
  const box = $("compare");
  if (!theirs) { box.hidden = true; return; }
  box.hidden = false;
  const side = (f, other, label, note) => {
    const items = f.fq.map((b, i) => {
      const st = freeState(f, b), diff = other.fq[i] !== b ? " differs" : "";
      return `<span class="chip static${diff}" data-state="${st}" style="width:${S.chip}px;height:${S.chip}px" ` +
        `title="block ${b}">${b}${T.glyph[st]}</span>`;
    }).join("");
    return `<div><div class="ptitle">${esc(label)} <small>${esc(note)}</small></div><div>${items || "<i>empty</i>"}</div></div>`;
  };
  const diffs = mine.fq.filter((b, i) => theirs.fq[i] !== b).length + Math.max(0, theirs.fq.length - mine.fq.length);
  box.innerHTML = `<div class="ptitle">Free queues side by side: ${diffs} position(s) differ (dotted outline)</div>` +
    `<div class="sides">` + side(mine, theirs, labels[0], notes[0]) + side(theirs, mine, labels[1], notes[1]) + "</div>";
}

// ---------- event log, card, legend ----------
export function renderLog(frames, pos) {
  if (!$("log").open) return;
  const lines = [];
  for (let i = Math.max(1, pos - 8); i <= Math.min(frames.length - 1, pos + 3); i++) {
    const c = frames[i].card;
    lines.push(`<li class="${i === pos ? "now" : i > pos ? "later" : ""}"><span class="n">${i}</span>` +
      `<span class="tag">${esc(c.tag)}</span> ${esc(c.body)}</li>`);
  }
  $("log-lines").innerHTML = lines.join("") || "<li>Nothing has happened yet.</li>";
}
export function renderCard(f) {
  const c = f.card;
  $("card").innerHTML = `<div class="head">${esc(c.head)}</div><span class="tag">${esc(c.tag)}</span>${esc(c.body)}` +
    (c.note ? `<br><i>Note: ${esc(c.note)}</i>` : "");
}
export function renderLegend(T, withDiffers) {
  const states = T.legend_states.map((s) => `<span class="chipl"><span class="sw" data-state="${s}">${T.glyph[s]}</span>${esc(T.label[s])}</span>`);
  const outs = Object.entries(T.outline_css).map(([k, css]) => `<span class="chipl"><span class="sw outline" style="outline:${css}"></span>${esc(T.outline_label[k])}</span>`);
  $("legend").innerHTML = states.concat(withDiffers ? outs : outs.slice(0, 2)).join("");
}

/** A guess button: a block of the free queue, in its state's colours. */
export function pickButton(b, state, T) {
  return `<button type="button" class="pick" data-block="${b}" data-state="${state}" title="block ${b}: ${esc(T.label[state])}">${b}${T.glyph[state]}</button>`;
}
export { freeState };
