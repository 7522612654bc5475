// Rezzo: one pixel per cell from the frame's codes (absolute owners), agents as arrows on top.
"use strict";
(function () {
  const P = window.CellarenaPalette, C = P.colors;
  const KINDS = { 8: "agent", 16: "flag", 24: "geyser", 32: "base" };
  const PLAIN = { 0: "blank", 1: "conductor", 2: "electron", 3: "tail", 4: "photon", 7: "oob" };
  // code -> palette name, for the board (absolute owners)
  function nameOf(code) {
    if (code < 8) return PLAIN[code] || "oob";
    return (KINDS[code & 0xf8] || "oob") + (code & 7);
  }
  const table = {};
  for (let code = 0; code < 40; code++) table[code] = P.hex(C[nameOf(code)] || C.oob);
  table.fallback = P.hex(C.oob);
  const FWD = [[0, -1], [1, 0], [0, 1], [-1, 0]], RIGHT = [[1, 0], [0, 1], [-1, 0], [0, -1]];
  const FACING = ["north", "east", "south", "west"];
  // The forfeits' cause words: server/games/causes.py's FORFEITS (tests/test_vocabulary.py).
  const FORFEITS = new Set(["disconnected", "exited", "limit", "never_connected", "refused", "unresponsive", "wrong_game"]);
  window.CellarenaGame = {
    viewSize: 13,
    scoreLabel: "agents",
    nameOf,
    size: (f) => [f.width, f.height],
    paint(f, out) { P.fill(out, P.bytes(f.cells), table); },
    overlay(ctx, f, view, meta, selected) {
      const s = view.cell;
      if (s >= 4) {
        for (const [player, index, x, y, facing, alive] of f.agents) {
          if (!alive) continue;
          const [cx, cy] = view.cellCenter(x, y);
          const [fx, fy] = FWD[facing], [rx, ry] = RIGHT[facing];
          const r = s * 0.34;
          ctx.fillStyle = "#000000";
          ctx.beginPath();
          ctx.moveTo(cx + fx * r, cy + fy * r);
          ctx.lineTo(cx - fx * r * 0.6 + rx * r * 0.7, cy - fy * r * 0.6 + ry * r * 0.7);
          ctx.lineTo(cx - fx * r * 0.6 - rx * r * 0.7, cy - fy * r * 0.6 - ry * r * 0.7);
          ctx.closePath();
          ctx.fill();
        }
      }
      if (selected) {
        const a = f.agents.find((a) => a[0] === selected.seat && a[1] === selected.agent && a[5]);
        if (!a) return;
        // the 13x13 the agent sees: 12 cells ahead, 6 to each side
        const [, , x, y, facing] = a;
        const [fx, fy] = FWD[facing], [rx, ry] = RIGHT[facing];
        const corners = [[0, -6], [0, 6], [12, 6], [12, -6]].map(([ahead, side]) => {
          const cx = x + fx * ahead + rx * side, cy = y + fy * ahead + ry * side;
          return [cx, cy];
        });
        const xs = corners.map((c) => c[0]), ys = corners.map((c) => c[1]);
        const [x0, y0] = view.cellCorner(Math.min(...xs), Math.min(...ys));
        const [x1, y1] = view.cellCorner(Math.max(...xs) + 1, Math.max(...ys) + 1);
        ctx.strokeStyle = "#ffffff";
        ctx.lineWidth = 2;
        ctx.setLineDash([6, 4]);
        ctx.strokeRect(x0, y0, x1 - x0, y1 - y0);
        ctx.setLineDash([]);
        const [ax, ay] = view.cellCorner(x, y);
        ctx.strokeRect(ax - 1, ay - 1, s + 2, s + 2);
      }
    },
    scores(f, meta) {
      const n = new Array(meta.players).fill(0);
      for (const a of f.agents) if (a[5]) n[a[0]] += 1;
      return n;
    },
    events(fr, meta) {
      // A seat that forfeited (its cause one of FORFEITS) is out, though the world still holds it.
      const res = fr.result || (fr.i === meta.frames - 1 ? meta.result : null);
      const gone = Object.entries((res && res.causes) || {}).filter(([s, c]) => FORFEITS.has(c.cause)
        && fr.frame.alive.includes(Number(s))).length;
      const left = fr.frame.alive.length - gone;
      return [`${left} of ${meta.players} players still in` + (gone ? ` (${gone} forfeited)` : "")];
    },
    legend(meta) {
      const rows = [];
      for (let s = 0; s < meta.players; s++) {
        rows.push([C["agent" + s], `${meta.names[s]}: agent (arrow shows facing)`]);
        rows.push([C["base" + s], `${meta.names[s]}: base`]);
        rows.push([C["geyser" + s], `${meta.names[s]}: geyser`]);
        rows.push([C["flag" + s], `${meta.names[s]}: flag`]);
      }
      for (const k of ["blank", "conductor", "electron", "tail", "photon"]) rows.push([C[k], k]);
      rows.push([C.oob, "outside the world (viewports)"]);
      return rows;
    },
    describe(f, x, y, meta) {
      if (x < 0 || y < 0 || x >= f.width || y >= f.height) return "";
      const code = P.bytes(f.cells)[y * f.width + x];
      const dmg = P.bytes(f.damage)[y * f.width + x];
      let what = nameOf(code).replace(/(\d)$/, " of " + "$1");
      const a = f.agents.find((a) => a[2] === x && a[3] === y && a[5]);
      if (a) what = `agent ${a[1]} of ${meta.names[a[0]]}, facing ${FACING[a[4]]} (click: its viewport)`;
      return `(${x}, ${y}) ${what}` + (dmg ? `, damage ${dmg}` : "");
    },
    click(f, x, y) {
      const a = f.agents.find((a) => a[2] === x && a[3] === y && a[5]);
      return a ? { seat: a[0], agent: a[1] } : null;
    },
    // a viewport's bytes: owners relative to the viewer (0 = itself), drawn in the board's colours
    viewName(code, seat, players) {
      if (code < 8) return PLAIN[code] || "oob";
      return (KINDS[code & 0xf8] || "oob") + (((code & 7) + seat) % players);
    },
    drawView(vctx, cells, dmg, seat, meta, px) {
      const n = 13;
      for (let r = 0; r < n; r++) {
        for (let c = 0; c < n; c++) {
          const code = cells[r * n + c];
          vctx.fillStyle = C[this.viewName(code, seat, meta.players)] || C.oob;
          vctx.fillRect(c * px, r * px, px, px);
          if (dmg && dmg[r * n + c]) {
            vctx.fillStyle = "#ff0000";
            vctx.fillRect(c * px + px - 4, r * px + 1, 3, 3 * dmg[r * n + c]);
          }
        }
      }
      vctx.strokeStyle = "#ffffff";
      vctx.lineWidth = 2;
      vctx.strokeRect(6 * px + 1, 12 * px + 1, px - 2, px - 2);
    },
  };
})();
