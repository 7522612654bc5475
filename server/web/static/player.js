// The replay player: fetches frames in chunks from the server's re-simulation and draws them with the
// game's module (static/games/<game>.js, which sets window.CellarenaGame). No framework, no build step.
"use strict";
(function () {
  const P = window.CellarenaPalette;
  const G = window.CellarenaGame;
  const root = document.getElementById("player");
  const api = root.dataset.api;
  const SPEEDS = [0.25, 0.5, 1, 2, 4, 8, 16, 32];
  const BASE_FPS = 10; // frames per second at 1x
  const FIRST_CHUNK = 8, CHUNK = 64, AHEAD = 256;
  const KEEP_BYTES = 256 * 1024 * 1024; // frame JSON kept in memory; the farthest frames go first

  const h = (tag, attrs, ...kids) => {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") el.className = v;
      else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v);
    }
    for (const kid of kids) el.append(kid);
    return el;
  };
  const b64 = P.bytes;

  // ------------------------------------------------------------------ layout
  const title = h("h1", {}, "loading…");
  const subtitle = h("div", { class: "subtitle" });
  const canvas = h("canvas", { id: "board", tabindex: "0" });
  const status = h("div", { class: "status", id: "status" });
  const hover = h("div", { class: "hover", id: "hover" });
  const stage = h("div", { class: "stage" }, canvas, status, hover);
  const playBtn = h("button", { id: "play", title: "Play / pause (space)" }, "▶");
  const backBtn = h("button", { id: "back", title: "Step back (←)" }, "◀︎|");
  const fwdBtn = h("button", { id: "forward", title: "Step forward (→)" }, "|▶︎");
  const seek = h("input", { id: "seek", type: "range", min: "0", max: "0", value: "0", "aria-label": "seek" });
  const tickLabel = h("span", { id: "tick", class: "tick" }, "tick –");
  const speedSel = h("select", { id: "speed", title: "Speed ([ and ])" });
  SPEEDS.forEach((s) => speedSel.append(h("option", { value: String(s) }, s + "×")));
  speedSel.value = "1";
  const zoomOut = h("button", { id: "zoom-out", title: "Zoom out (-)" }, "−");
  const zoomFit = h("button", { id: "zoom-fit", title: "Fit the board (0)" }, "fit");
  const zoomIn = h("button", { id: "zoom-in", title: "Zoom in (+)" }, "+");
  // The deciding events as marks under the seek bar (a click jumps to the frame they lead to).
  const marks = h("div", { class: "marks", id: "marks" });
  const seekWrap = h("div", { class: "seekwrap" }, seek, marks);
  const controls = h("div", { class: "controls" },
    backBtn, playBtn, fwdBtn, seekWrap, tickLabel, speedSel, zoomOut, zoomFit, zoomIn);
  const seatsTable = h("table", { class: "seats", id: "seats" });
  const events = h("ul", { class: "events", id: "events" });
  const legend = h("ul", { class: "legend", id: "legend" });
  const vpCanvas = h("canvas", { id: "viewport", width: "221", height: "221" });
  const vpCaption = h("div", { class: "caption", id: "viewport-caption" });
  const vpPanel = h("section", { class: "panel viewport hidden", id: "viewport-panel" },
    h("h2", {}, "What the agent saw"), vpCanvas, vpCaption);
  const keys = h("details", { class: "panel keys" }, h("summary", {}, "Keyboard"),
    h("p", {}, "space play/pause · ←/→ step · shift+←/→ 10 steps · Home/End · [ ] speed · + − 0 zoom · " +
      "drag to pan · wheel to zoom" + (G && G.click ? " · click an agent to see its viewport, Esc to close" : "")));
  // The bots' debug drawings (docs/protocol.md#debug-drawing): a layer per seat, each with its toggle.
  const debugToggles = h("div", { class: "debug-toggles", id: "debug-toggles" });
  const debugText = h("ul", { class: "events", id: "debug-text" });
  const debugPanel = h("section", { class: "panel hidden", id: "debug-panel" },
    h("h2", {}, "What the bots drew"), debugToggles, debugText);
  const side = h("aside", {},
    h("section", { class: "panel" }, h("h2", {}, "Seats"), seatsTable),
    h("section", { class: "panel" }, h("h2", {}, "This tick"), events),
    debugPanel,
    vpPanel,
    h("section", { class: "panel" }, h("h2", {}, "Legend"), legend),
    keys);
  root.append(h("header", {}, title, subtitle), h("div", { class: "main" }, h("div", { class: "left" }, stage, controls), side));

  // ------------------------------------------------------------------ state
  const state = {
    meta: null, frames: [], bytes: 0, sizes: [], index: 0, shown: -1, playing: false, speed: 1,
    acc: 0, inflight: new Map(), error: null, scale: 1, ox: 0, oy: 0, fitted: false,
    selected: null, observation: null, obsKey: "",
    hiddenDebug: new Set(), // seats whose drawing layer is off (every layer is on at first)
  };
  const off = document.createElement("canvas");
  const offCtx = off.getContext("2d");
  const ctx = canvas.getContext("2d");

  function showError(msg) {
    state.error = msg;
    status.textContent = msg;
    status.classList.add("error");
    state.playing = false;
    playBtn.textContent = "▶";
  }

  async function getJSON(url) {
    const r = await fetch(url, { headers: { accept: "application/json" } });
    let body;
    try { body = await r.json(); } catch (e) { throw new Error(`${url}: the server sent no JSON (HTTP ${r.status})`); }
    if (!r.ok) throw new Error(body.error || `HTTP ${r.status}`);
    return body;
  }

  function fetchChunk(start, count) {
    if (state.error || start >= state.meta.frames || state.frames[start] || state.inflight.has(start)) return;
    const p = getJSON(`${api}/frames?from=${start}&count=${count}`).then((list) => {
      for (const f of list) {
        if (!state.frames[f.i]) {
          const size = JSON.stringify(f.frame).length;
          state.frames[f.i] = f;
          for (const s of Object.keys(f.debug || {})) state.meta.debugSeats.add(Number(s));
          state.sizes[f.i] = size;
          state.bytes += size;
        }
      }
      evict();
      state.inflight.delete(start);
      const next = start + list.length;
      if (next < state.meta.frames && next < state.index + AHEAD) fetchChunk(next, CHUNK);
      draw(true);
    }).catch((e) => { state.inflight.delete(start); showError(e.message); });
    state.inflight.set(start, p);
  }

  function evict() {
    if (state.bytes <= KEEP_BYTES) return;
    const order = Object.keys(state.frames).map(Number).sort((a, b) => Math.abs(b - state.index) - Math.abs(a - state.index));
    for (const i of order) {
      if (state.bytes <= KEEP_BYTES * 0.75) break;
      if (Math.abs(i - state.index) < 4) continue;
      state.bytes -= state.sizes[i];
      delete state.frames[i];
    }
  }

  function ensure(i) {
    if (state.frames[i]) {
      // keep a run of frames ahead loaded
      for (let j = i + 1; j < Math.min(state.meta.frames, i + 16); j++) {
        if (!state.frames[j]) { if (![...state.inflight.keys()].some((s) => s <= j && j < s + CHUNK)) fetchChunk(j, CHUNK); break; }
      }
      return;
    }
    if (![...state.inflight.keys()].some((s) => s <= i && i < s + CHUNK)) fetchChunk(i, CHUNK);
  }

  // ------------------------------------------------------------------ view transform
  function resize() {
    const rect = stage.getBoundingClientRect();
    const w = Math.max(200, Math.floor(rect.width)), hgt = Math.max(200, Math.floor(rect.height));
    if (canvas.width !== w || canvas.height !== hgt) { canvas.width = w; canvas.height = hgt; if (!state.fitted) fit(); }
  }
  function fit() {
    if (!off.width) return;
    const pad = G.padLeft || 0; // room the game draws labels in, left of the board
    const s = Math.min((canvas.width - pad) / off.width, canvas.height / off.height) * 0.96;
    state.scale = s >= 1 ? Math.floor(s) : s;
    state.ox = Math.round(pad + (canvas.width - pad - off.width * state.scale) / 2);
    state.oy = Math.round((canvas.height - off.height * state.scale) / 2);
    state.fitted = true;
  }
  function zoom(factor, cx, cy) {
    const x = cx === undefined ? canvas.width / 2 : cx, y = cy === undefined ? canvas.height / 2 : cy;
    const s = Math.max(0.05, Math.min(96, state.scale * factor));
    state.ox = x - (x - state.ox) * (s / state.scale);
    state.oy = y - (y - state.oy) * (s / state.scale);
    state.scale = s;
    draw(true);
  }
  const view = {
    cellCenter: (x, y) => [state.ox + (x + 0.5) * state.scale, state.oy + (y + 0.5) * state.scale],
    cellCorner: (x, y) => [state.ox + x * state.scale, state.oy + y * state.scale],
    get cell() { return state.scale; },
    toCell(px, py) { return [Math.floor((px - state.ox) / state.scale), Math.floor((py - state.oy) / state.scale)]; },
  };

  // ------------------------------------------------------------------ drawing
  function draw(force) {
    if (!state.meta) return;
    resize();
    const f = state.frames[state.index];
    if (!f) { status.textContent = state.error || `loading frame ${state.index}…`; ensure(state.index); return; }
    if (state.error) return;
    status.textContent = "";
    if (!force && state.shown === state.index) return;
    const [w, hh] = G.size(f.frame, state.meta);
    if (off.width !== w || off.height !== hh) { off.width = w; off.height = hh; state.fitted = false; }
    if (!state.fitted) fit();
    if (!state.img || state.img.width !== w || state.img.height !== hh) state.img = offCtx.createImageData(w, hh);
    const img = state.img; // reused: a 1024x1024 board would otherwise allocate 4 MB a frame
    G.paint(f.frame, img.data, state.meta);
    offCtx.putImageData(img, 0, 0);
    ctx.imageSmoothingEnabled = false;
    ctx.fillStyle = P.colors.background;
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    ctx.drawImage(off, state.ox, state.oy, w * state.scale, hh * state.scale);
    ctx.strokeStyle = "#3a3f48";
    ctx.lineWidth = 1;
    ctx.strokeRect(state.ox - 1.5, state.oy - 1.5, w * state.scale + 3, hh * state.scale + 3);
    if (G.overlay) G.overlay(ctx, f.frame, view, state.meta, state.selected);
    highlight(f);
    drawDebug(f);
    state.shown = state.index;
    const api_ = window.cellarenaPlayer;
    api_.paints += 1;
    if (api_.firstFrameMs === null) api_.firstFrameMs = performance.now();
    seek.value = String(state.index);
    const last = state.index === state.meta.frames - 1;
    const sub = f.sub === undefined || f.sub === null ? "" : `, ${G.subName ? G.subName(f.frame) : "between decision points"}`;
    tickLabel.textContent = !f.live ? `tick ${f.tick}${sub}` + (last ? " (end)" : "") + `  ·  ${state.index + 1}/${state.meta.frames}`
      : live.following ? `tick ${f.tick} (live)`
        : `tick ${f.tick} (paused: frame ${state.index + 1} of ${state.meta.frames} received)`;
    updateSeats(f);
    updateEvents(f);
    if (state.selected) updateViewport();
    root.dataset.shown = String(state.index);
  }

  // Marks fill most of their cell (a border of the board's colour stays), lines join cell centres.
  // What to draw over frame f: its tick's drawings. Live, a bot draws while the world moves on, so its
  // drawing comes with the next frame: while following, the newest frame shows the newest drawing.
  function shownDebug(f) {
    const own = f.debug || {};
    if (!f.live || !live.following || f.i !== state.frames.length - 1 || Object.keys(own).length) return own;
    return live.lastDebug ? live.lastDebug.debug : own;
  }
  function drawDebug(f) {
    const drawn = shownDebug(f);
    const seats = Object.keys(drawn).map(Number).filter((s) => !state.hiddenDebug.has(s));
    const s = view.cell;
    for (const seat of seats) {
      const d = drawn[seat];
      ctx.lineWidth = Math.max(1, s * 0.15);
      for (const ln of d.lines || []) {
        ctx.strokeStyle = ln.colour;
        ctx.beginPath();
        ctx.moveTo(...view.cellCenter(ln.from[0], ln.from[1]));
        ctx.lineTo(...view.cellCenter(ln.to[0], ln.to[1]));
        ctx.stroke();
      }
      for (const m of d.marks || []) {
        const [x0, y0] = view.cellCorner(m.cell[0], m.cell[1]);
        const pad = s >= 6 ? s * 0.1 : 0;
        ctx.fillStyle = m.colour;
        ctx.fillRect(x0 + pad, y0 + pad, s - 2 * pad, s - 2 * pad);
        if (m.label && s >= 10) {
          ctx.font = `${Math.max(10, Math.round(s * 0.5))}px sans-serif`;
          ctx.fillStyle = "#ffffff";
          ctx.strokeStyle = "#000000";
          ctx.lineWidth = 3;
          ctx.strokeText(m.label, x0 + s, y0);
          ctx.fillText(m.label, x0 + s, y0);
        }
      }
    }
    updateDebugPanel(f);
  }
  function updateDebugPanel(f) {
    const drawn = shownDebug(f);
    const any = state.meta.debugSeats.size > 0;
    debugPanel.classList.toggle("hidden", !any);
    if (!any) return;
    const toggles = [...state.meta.debugSeats].sort((a, b) => a - b).map((s) => {
      const box = h("input", { type: "checkbox", id: `debug-seat-${s}`, "data-seat": String(s) });
      box.checked = !state.hiddenDebug.has(s);
      box.onchange = () => {
        if (box.checked) state.hiddenDebug.delete(s); else state.hiddenDebug.add(s);
        draw(true);
      };
      return h("label", {}, box, " ", seatCell(s).firstChild, ` ${state.meta.names[s]}`);
    });
    debugToggles.replaceChildren(...toggles);
    const lines = [];
    for (const [s, d] of Object.entries(drawn)) {
      if (state.hiddenDebug.has(+s)) continue;
      // What its code raised at this tick (docs/protocol.md#debug-drawing): its owner's, as its drawings.
      if (d.error) lines.push({ error: true, t: `${state.meta.names[+s]}: exception at tick ${f.tick}: ${d.error}` });
      for (const t of d.text || []) lines.push({ t: `${state.meta.names[+s]}: ${t}` });
    }
    if (!lines.length) lines.push({ t: "no text this tick" });
    debugText.replaceChildren(...lines.map((l) => h("li", l.error ? { class: "exception" } : {}, l.t)));
  }

  function seatCell(s) {
    return h("td", {}, h("span", { class: "swatch", style: `background:${P.seats[s % 8]}` }), ` ${state.meta.names[s]}`);
  }
  function updateSeats(f) {
    const scores = G.scores ? G.scores(f.frame, state.meta) : [];
    const count = (key, s) => (f.totals ? String(f.totals[key][s]) : "–");
    const head = h("tr", {}, h("th", {}, "seat"), h("th", {}, G.scoreLabel || "score"),
      // The words of server/games/words.py's COUNTS, as `match`, tournaments and `results` say them.
      h("th", { title: "late or missing answers (each plays no move)" }, "late"),
      h("th", { title: "invalid answers (on_tick raised, or an answer the game cannot read: each plays no move)" }, "invalid"),
      h("th", { title: "moves the game refused" }, "illegal"));
    const rows = state.meta.names.map((_, s) => h("tr", { "data-seat": String(s) }, seatCell(s),
      h("td", { class: "num score" }, scores[s] === undefined ? "–" : String(scores[s])),
      h("td", { class: "num late" }, count("late", s)),
      h("td", { class: "num invalid" }, count("invalid", s)),
      h("td", { class: "num illegal" }, count("illegal", s))));
    seatsTable.replaceChildren(head, ...rows);
  }
  function name(s) { return `${state.meta.names[s] ?? "?"} (seat ${s})`; }
  // The events that decided the match: those whose kind is a seat's cause, and players out; if a
  // match has none, every event of a short list but tallies (a `count`, as Rezzo's blocked agents:
  // one nearly every tick would crowd out the rest) (docs/web.md).
  function decidingEvents(m) {
    const all = (m.events || []).filter((e) => !("count" in e));
    const kinds = new Set(Object.values((m.result && m.result.causes) || {}).map((c) => c.cause));
    kinds.add("out");
    const picked = all.filter((e) => kinds.has(e.kind));
    return picked.length || all.length > 120 ? picked : all;
  }
  // Cells of the deciding events ([x, y] fields) outlined on their frame, the frame before (the
  // world before the loss conversion) and the last frame.
  function highlight(f) {
    const m = state.meta, last = f.i === m.frames - 1;
    const cells = [];
    decidingEvents(m).filter((e) => last || e.frame === f.i || e.frame === f.i + 1).forEach((e) =>
      Object.values(e).forEach((v) => {
        if (Array.isArray(v) && v.length === 2 && v.every((n) => Number.isInteger(n))) cells.push(v);
      }));
    window.cellarenaPlayer.highlighted = cells;
    if (!cells.length) return;
    ctx.strokeStyle = "#ff2d55";
    ctx.lineWidth = Math.max(2, state.scale / 6);
    const sc = state.scale;
    cells.forEach(([x, y]) => ctx.strokeRect(state.ox + x * sc - 1, state.oy + y * sc - 1, sc + 2, sc + 2));
  }
  function showMarks(m) {
    const n = Math.max(1, m.frames - 1), byFrame = new Map();
    decidingEvents(m).forEach((e) => byFrame.set(e.frame, [...(byFrame.get(e.frame) || []), eventText(e)]));
    marks.replaceChildren(...[...byFrame].map(([frame, said]) => h("button", {
      class: "mark", title: `frame ${frame}: ${said.join("; ")}`, "data-frame": String(frame),
      style: `left: calc(${(100 * frame) / n}% - 4px)`, onclick: () => go(frame),
    })));
  }
  // A game event (docs/replays.md#events) as a line: whose, what, then its fields; cells as (x, y).
  function eventText(e) {
    const show = (k, v) => {
      if (Array.isArray(v) && v.length === 2 && v.every((n) => typeof n === "number")) return `(${v[0]}, ${v[1]})`;
      if (k === "by" && typeof v === "number") return name(v);
      return Array.isArray(v) ? v.join(" / ") : String(v);
    };
    const fields = Object.entries(e).filter(([k]) => !["kind", "tick", "seat", "frame"].includes(k))
      .map(([k, v]) => `${k} ${show(k, v)}`);
    const who = typeof e.seat === "number" ? `${name(e.seat)}: ` : "";
    return `${who}${String(e.kind).replaceAll("_", " ")}${fields.length ? ` (${fields.join(", ")})` : ""}`;
  }
  function updateEvents(f) {
    const items = [];
    const st = f.step || {};
    const each = (m, one, many) => Object.entries(m || {}).forEach(([s, n]) => items.push(`${name(+s)}: ${n} ${n === 1 ? one : many}`));
    each(st.late, "late answer", "late answers"); each(st.invalid, "invalid answer", "invalid answers");
    each(st.illegal, "illegal move", "illegal moves"); each(st.malformed, "malformed move", "malformed moves");
    (st.losers || []).forEach((s) => items.push(`${name(s)} is out`));
    (st.events || []).forEach((e) => items.push(eventText(e)));
    if (G.events) G.events(f, state.meta).forEach((e) => items.push(e));
    const res = f.result || (f.i === state.meta.frames - 1 ? state.meta.result : null);
    if (res) {
      items.push(res.winner === null || res.winner === undefined ? `draw: ${res.reason}` : `${name(res.winner)} wins: ${res.reason}`);
      Object.values(res.causes || {}).forEach((c) => items.push(`why: ${c.text || c.cause}`));
    } else if (!f.live && f.i === state.meta.frames - 1 && !state.meta.complete) {
      items.push(`the replay ends here without a result: ${state.meta.incomplete}`);
    }
    if (f.live) items.push(...liveNotes(f));
    if (!items.length) items.push("nothing of note");
    events.replaceChildren(...items.map((t) => h("li", {}, t)));
  }

  // ------------------------------------------------------------------ viewport overlay
  async function updateViewport() {
    const sel = state.selected;
    const key = `${state.index}/${sel.seat}`;
    if (state.obsKey === key) { drawViewport(); return; }
    state.obsKey = key;
    try {
      const obs = await getJSON(`${api}/observation?i=${state.index}&seat=${sel.seat}`);
      if (state.obsKey !== key) return;
      state.observation = obs;
      drawViewport();
    } catch (e) { vpCaption.textContent = e.message; }
  }
  function drawViewport() {
    const sel = state.selected, obs = state.observation;
    const vctx = vpCanvas.getContext("2d");
    vctx.fillStyle = P.colors.background;
    vctx.fillRect(0, 0, vpCanvas.width, vpCanvas.height);
    const k = obs && obs.agents ? obs.agents.indexOf(sel.agent) : -1;
    if (k < 0) {
      vpCaption.textContent = `${name(sel.seat)} agent ${sel.agent}: no view this tick (gone, or the seat did not act)`;
      root.dataset.viewport = "";
      return;
    }
    const n = G.viewSize;
    const cells = b64(obs.cells).subarray(k * n * n, (k + 1) * n * n);
    const dmg = obs.damage ? b64(obs.damage).subarray(k * n * n, (k + 1) * n * n) : null;
    G.drawView(vctx, cells, dmg, sel.seat, state.meta, vpCanvas.width / n);
    vpCaption.textContent = `${name(sel.seat)} agent ${sel.agent}, tick ${obs.tick}: the ${n}×${n} bytes it was sent ` +
      `(it stands at the bottom centre, facing up; owners as it saw them, coloured as on the board)`;
    root.dataset.viewport = `${state.index}/${sel.seat}/${sel.agent}`;
  }
  function select(sel) {
    state.selected = sel;
    state.obsKey = "";
    vpPanel.classList.toggle("hidden", !sel);
    if (!sel) root.dataset.viewport = "";
    draw(true);
  }

  // ------------------------------------------------------------------ controls
  function go(i) {
    if (!state.meta) return;
    if (state.meta.live && live.following) follow(false); // looking back pauses the live view
    state.index = Math.max(0, Math.min(state.meta.frames - 1, i));
    ensure(state.index);
    draw(false);
  }
  function setPlaying(on) {
    if (state.meta && state.meta.live) { follow(on); return; }
    state.playing = on && !state.error;
    playBtn.textContent = state.playing ? "⏸" : "▶";
    if (state.playing && state.index >= state.meta.frames - 1) go(0);
    if (state.playing) wake();
  }
  function setSpeed(i) {
    const idx = Math.max(0, Math.min(SPEEDS.length - 1, i));
    state.speed = SPEEDS[idx];
    speedSel.value = String(state.speed);
  }
  const playOrPause = () => setPlaying(state.meta && state.meta.live ? !live.following : !state.playing);
  playBtn.onclick = playOrPause;
  backBtn.onclick = () => { setPlaying(false); go(state.index - 1); };
  fwdBtn.onclick = () => { setPlaying(false); go(state.index + 1); };
  seek.oninput = () => go(Number(seek.value));
  speedSel.onchange = () => { state.speed = Number(speedSel.value); };
  zoomIn.onclick = () => zoom(1.5);
  zoomOut.onclick = () => zoom(1 / 1.5);
  zoomFit.onclick = () => { fit(); draw(true); };
  document.addEventListener("keydown", (e) => {
    if (e.target === speedSel) return;
    const step = e.shiftKey ? 10 : 1;
    const keys = {
      " ": playOrPause,
      ArrowRight: () => { setPlaying(false); go(state.index + step); },
      ArrowLeft: () => { setPlaying(false); go(state.index - step); },
      Home: () => go(0),
      End: () => go(state.meta.frames - 1),
      "[": () => setSpeed(SPEEDS.indexOf(state.speed) - 1),
      "]": () => setSpeed(SPEEDS.indexOf(state.speed) + 1),
      "+": () => zoom(1.5), "=": () => zoom(1.5), "-": () => zoom(1 / 1.5),
      "0": () => { fit(); draw(true); },
      Escape: () => select(null),
    };
    const act = keys[e.key];
    if (act) { e.preventDefault(); act(); }
  });
  let drag = null;
  canvas.addEventListener("mousedown", (e) => { drag = { x: e.offsetX, y: e.offsetY, ox: state.ox, oy: state.oy, moved: false }; });
  window.addEventListener("mouseup", () => { setTimeout(() => { drag = null; }, 0); });
  canvas.addEventListener("mousemove", (e) => {
    if (drag && (e.buttons & 1)) {
      const dx = e.offsetX - drag.x, dy = e.offsetY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
      if (drag.moved) { state.ox = drag.ox + dx; state.oy = drag.oy + dy; draw(true); }
    }
    const f = state.frames[state.index];
    const [x, y] = view.toCell(e.offsetX, e.offsetY);
    hover.textContent = f && G.describe ? G.describe(f.frame, x, y, state.meta) || "" : "";
  });
  canvas.addEventListener("wheel", (e) => { e.preventDefault(); zoom(e.deltaY < 0 ? 1.25 : 0.8, e.offsetX, e.offsetY); }, { passive: false });
  canvas.addEventListener("click", (e) => {
    if (drag && drag.moved) return;
    const f = state.frames[state.index];
    if (!f || !G.click) return;
    const [x, y] = view.toCell(e.offsetX, e.offsetY);
    const sel = G.click(f.frame, x, y, state.meta);
    if (sel) select(sel);
  });
  window.addEventListener("resize", () => { state.fitted = false; draw(true); });

  // The animation loop runs only while a replay plays (`wake`): a paused replay or a live view (drawn
  // as each frame arrives) asks the browser for no frames, where an idle loop cost Chromium 7% of a
  // core for every open page.
  let looping = false;
  let last = 0;
  function loop(now) {
    if (!(state.playing && state.meta)) { looping = false; return; }
    const dt = Math.max(0, Math.min(0.25, (now - last) / 1000));
    last = now;
    state.acc += dt * BASE_FPS * state.speed;
    while (state.acc >= 1) {
      state.acc -= 1;
      if (state.index >= state.meta.frames - 1) { setPlaying(false); break; }
      if (!state.frames[state.index + 1]) { ensure(state.index + 1); state.acc = 0; break; }
      state.index += 1;
      window.cellarenaPlayer.drawn += 1;
    }
    ensure(state.index);
    draw(false);
    requestAnimationFrame(loop);
  }
  function wake() {
    if (looping) return;
    looping = true;
    last = performance.now();
    requestAnimationFrame(loop);
  }

  // ------------------------------------------------------------------ live
  // The live page: frames arrive over a WebSocket and are kept (the oldest dropped past LIVE_KEEP_BYTES),
  // so that the view can be paused and stepped or sought through what arrived; play follows the newest
  // again. Speed means nothing here (frames come at the match's pace), so its control is hidden.
  const LIVE_KEEP_BYTES = 64 * 1024 * 1024;
  const live = { ended: false, result: null, frames: 0, following: true, bytes: 0, sizes: [], lastDebug: null };
  function follow(on) {
    live.following = on;
    playBtn.textContent = on ? "⏸" : "▶";
    playBtn.title = on ? "Pause the view (space); the match goes on" : "Follow the match live again (space)";
    if (on && state.frames.length) state.index = state.frames.length - 1;
    draw(true);
  }
  function liveNotes(f) {
    const notes = [];
    if (f.frame.final) notes.push("the final state of the match");
    const r = live.result;
    if (r) notes.push(r.winner === null ? `draw: ${r.reason}` : `${r.winner} wins: ${r.reason}`);
    else if (live.ended) notes.push("the match has ended");
    return notes;
  }
  function liveTotals() {
    const r = live.result;
    if (!r) return null;
    const by = (key) => state.meta.names.map((n) => (r[key] && r[key][n] !== undefined ? r[key][n] : 0));
    return { late: by("late"), invalid: by("invalid"), illegal: by("illegal") };
  }
  function startLive(path) {
    const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + path;
    status.textContent = "waiting for a match to start…";
    speedSel.hidden = true;
    follow(true);
    const ws = new WebSocket(url);
    ws.onmessage = (event) => {
      const m = JSON.parse(event.data);
      if (m.type === "welcome") {
        live.ended = false; live.result = null; live.bytes = 0; live.sizes = []; live.lastDebug = null;
        state.frames = []; state.index = 0;
        state.meta = { game: m.game, names: m.names, players: m.players, frames: 0, result: null,
          complete: false, name: `live match ${m.match}`, seed: null, live: true,
          debugSeats: new Set() };
        title.textContent = `${m.game}: ${m.names.join(" vs ")} (live)`;
        subtitle.textContent = `match ${m.match} · ${m.tick_rate ? m.tick_rate + " ticks a second" : "fast"}`;
        legend.replaceChildren(...G.legend(state.meta).map(([color, label]) =>
          h("li", {}, h("span", { class: "swatch", style: `background:${color}` }), " " + label)));
        status.textContent = "waiting for the first frame…";
      } else if (m.type === "frame" && state.meta) {
        live.frames += 1;
        const size = event.data.length;
        if (m.debug) { // the drawings of tick m.debug_tick (docs/protocol.md#spectators), on its frame
          for (let i = state.frames.length - 1; i >= 0; i--) {
            if (state.frames[i].tick === m.debug_tick) { state.frames[i].debug = m.debug; break; }
          }
          live.lastDebug = { tick: m.debug_tick, debug: m.debug };
          for (const s of Object.keys(m.debug)) state.meta.debugSeats.add(Number(s));
          root.dataset.liveDebugTick = String(m.debug_tick);
        }
        state.frames.push({ i: state.frames.length, tick: m.tick, frame: m, step: {}, totals: liveTotals(), result: null, live: true, debug: {} });
        live.sizes.push(size); live.bytes += size;
        let dropped = 0;
        while (live.bytes > LIVE_KEEP_BYTES && state.frames.length > 1) { live.bytes -= live.sizes.shift(); state.frames.shift(); dropped += 1; }
        if (dropped) state.frames.forEach((f, i) => { f.i = i; });
        state.meta.frames = state.frames.length;
        seek.max = String(state.frames.length - 1);
        state.index = live.following ? state.frames.length - 1 : Math.max(0, state.index - dropped);
        root.dataset.liveTick = String(m.tick);
        root.dataset.liveFrames = String(live.frames);
        draw(true);
      } else if (m.type === "end") {
        live.ended = true;
        draw(true);
      } else if (m.type === "result") {
        live.result = m;
        live.ended = true;
        if (state.frames.length) state.frames[state.frames.length - 1].totals = liveTotals();
        root.dataset.liveResult = m.winner === null ? "draw" : m.winner;
        subtitle.textContent += ` · ${m.winner === null ? "draw" : m.winner + " wins"} (${m.reason})`;
        draw(true);
      }
    };
    ws.onclose = () => { if (!live.ended) status.textContent = "the server closed the live view"; };
  }

  // ------------------------------------------------------------------ start
  window.cellarenaPlayer = {
    state, view, drawn: 0, paints: 0, firstFrameMs: null, highlighted: [],
    redraw: () => draw(true),
    seek: go,
    play: () => setPlaying(true),
    select,
    vpCellCenter: (r, c) => [(c + 0.5) * vpCanvas.width / G.viewSize, (r + 0.5) * vpCanvas.height / G.viewSize],
  };
  (async () => {
    if (!G) { showError(`this cellarena has no drawing for the game ${root.dataset.game}`); return; }
    if (root.dataset.live) { startLive(root.dataset.live); return; }
    try {
      state.meta = await getJSON(`${api}/meta`);
      state.meta.debugSeats = new Set(); // the seats seen drawing so far, each with its toggle
    } catch (e) { showError(e.message); return; }
    const m = state.meta;
    title.textContent = `${m.game}: ${m.names.join(" vs ")}`;
    const res = m.result ? (m.result.winner === null ? `draw (${m.result.reason})` : `${m.names[m.result.winner]} wins (${m.result.reason})`) : "no result (incomplete replay)";
    subtitle.textContent = `${m.name} · seed ${m.seed} · ${m.frames} frames · ${res}`;
    if (m.forked_from) { // a fork: where it came from, a link when its origin is served here too
      const o = m.forked_from;
      const origin = o.link ? h("a", { href: o.link, id: "forked-from" }, o.replay) : h("span", { id: "forked-from" }, o.replay);
      subtitle.append(" · forked from ", origin, ` at tick ${o.tick}`);
    }
    seek.max = String(m.frames - 1);
    showMarks(m);
    legend.replaceChildren(...G.legend(m).map(([color, label]) =>
      h("li", {}, h("span", { class: "swatch", style: `background:${color}` }), " " + label)));
    fetchChunk(0, FIRST_CHUNK);
  })();
})();
