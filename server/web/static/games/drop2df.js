// drop2df: each seat's row of cells, one board row per seat.
"use strict";
(function () {
  const P = window.CellarenaPalette, C = P.colors;
  const NAMES = ["d_empty", "d_plus", "d_minus", "d_block", "d_rabbit", "d_hole"];
  Object.assign(C, {
    d_empty: "#30343d", d_plus: "#009E73", d_minus: "#D55E00", d_block: "#8a8f99",
    d_rabbit: "#F0E442", d_hole: "#000000",
  });
  const table = { fallback: P.hex(C.oob) };
  NAMES.forEach((n, i) => { table[i] = P.hex(C[n]); });
  function rows(f) {
    if (f._rows) return f._rows;
    const r = f.rows.map((x) => P.bytes(x));
    Object.defineProperty(f, "_rows", { value: r });
    return r;
  }
  window.CellarenaGame = {
    scoreLabel: "score",
    padLeft: 140,
    codeName: (code) => NAMES[code],
    rowsOf: rows,
    size: (f) => [rows(f)[0].length, rows(f).length],
    paint(f, out) {
      const rs = rows(f), w = rs[0].length;
      rs.forEach((row, s) => {
        for (let x = 0; x < w; x++) {
          const c = table[row[x]] || table.fallback, o = (s * w + x) * 4;
          out[o] = c[0]; out[o + 1] = c[1]; out[o + 2] = c[2]; out[o + 3] = 255;
        }
      });
    },
    overlay(ctx, f, view, meta) {
      const s = view.cell, rs = rows(f), w = rs[0].length;
      ctx.strokeStyle = C.background; ctx.lineWidth = Math.max(1, s * 0.06);
      for (let y = 0; y <= rs.length; y++) {
        const [x0, y0] = view.cellCorner(0, y), [x1] = view.cellCorner(w, y);
        ctx.beginPath(); ctx.moveTo(x0, y0); ctx.lineTo(x1, y0); ctx.stroke();
      }
      for (let x = 0; x <= w; x++) {
        const [x0, y0] = view.cellCorner(x, 0), [, y1] = view.cellCorner(x, rs.length);
        ctx.beginPath(); ctx.moveTo(x0, y0); ctx.lineTo(x0, y1); ctx.stroke();
      }
      if (s >= 14) {
        ctx.textAlign = "center"; ctx.textBaseline = "middle";
        ctx.font = `bold ${Math.floor(s * 0.45)}px ui-monospace, monospace`;
        rs.forEach((row, y) => row.forEach((code, x) => {
          const [cx, cy] = view.cellCenter(x, y);
          ctx.fillStyle = code === 5 ? "#777777" : "#000000";
          ctx.fillText(" +-#@0"[code] || "?", cx, cy);
        }));
      }
      ctx.textAlign = "right"; ctx.textBaseline = "middle";
      ctx.font = `${Math.max(10, Math.min(18, s * 0.4))}px sans-serif`;
      rs.forEach((_, seat) => {
        const [x0, y0] = view.cellCorner(0, seat);
        ctx.fillStyle = C["seat" + seat];
        ctx.fillText(meta.names[seat], x0 - 6, y0 + s / 2);
      });
    },
    scores: (f) => f.scores,
    // The frame after the last turn names the turn that would come next: say the turns are done.
    events(fr) {
      const f = fr.frame;
      return [f.turn > f.turns ? `all ${f.turns} turns played` : `turn ${f.turn} of ${f.turns}`];
    },
    legend() {
      return [[C.d_empty, "[ ] empty"], [C.d_plus, "[+] positive charge"], [C.d_minus, "[-] negative charge"],
        [C.d_block, "[#] block"], [C.d_rabbit, "[@] the r@bbit wave"], [C.d_hole, "[0] hole"]];
    },
    describe(f, x, y, meta) {
      const rs = rows(f);
      if (y < 0 || y >= rs.length || x < 0 || x >= rs[0].length) return "";
      return `${meta.names[y]}, cell ${x}: ${NAMES[rs[y][x]].slice(2)}`;
    },
  };
})();
