// Colorblocks: blocks as pixels; guards and units drawn on top, each in its seat's colour.
"use strict";
(function () {
  const P = window.CellarenaPalette, C = P.colors;
  const NAMES = ["cb_neutral", "cb_red", "cb_blue", "cb_true_neutral", "cb_dead", "cb_objective_red",
    "cb_objective_blue", "cb_spawn_red", "cb_spawn_blue"];
  Object.assign(C, {
    cb_neutral: "#3b4049", cb_red: P.mix(C.seat0, "#000000", 0.15), cb_blue: P.mix(C.seat1, "#000000", 0.15),
    cb_true_neutral: "#6d737d", cb_dead: "#0b0c0e", cb_objective_red: P.mix(C.seat0, "#ffffff", 0.45),
    cb_objective_blue: P.mix(C.seat1, "#ffffff", 0.45), cb_spawn_red: P.mix(C.seat0, "#000000", 0.55),
    cb_spawn_blue: P.mix(C.seat1, "#000000", 0.55),
  });
  const table = { fallback: P.hex(C.oob) };
  NAMES.forEach((n, i) => { table[i] = P.hex(C[n]); });
  const LETTER = { fighter: "F", paver: "P", cleaner: "C", shooter: "S", shield: "D" };
  window.CellarenaGame = {
    scoreLabel: "units",
    blockName: (code) => NAMES[code],
    size: (f) => [f.width, f.height],
    paint(f, out) { P.fill(out, P.bytes(f.board), table); },
    overlay(ctx, f, view) {
      const s = view.cell;
      ctx.textAlign = "center"; ctx.textBaseline = "middle";
      ctx.font = `bold ${Math.max(8, Math.floor(s * 0.45))}px sans-serif`;
      for (const [owner, x, y] of f.guards) {
        const [x0, y0] = view.cellCorner(x, y);
        ctx.strokeStyle = C["seat" + owner]; ctx.lineWidth = Math.max(2, s * 0.12);
        ctx.strokeRect(x0 + s * 0.22, y0 + s * 0.22, s * 0.56, s * 0.56);
      }
      for (const [, owner, kind, x, y] of f.units) {
        const [cx, cy] = view.cellCenter(x, y);
        ctx.fillStyle = C["seat" + owner];
        ctx.strokeStyle = "#000000"; ctx.lineWidth = 2;
        ctx.beginPath(); ctx.arc(cx, cy, s * 0.36, 0, 2 * Math.PI); ctx.fill(); ctx.stroke();
        ctx.fillStyle = "#000000";
        ctx.fillText(LETTER[kind] || "?", cx, cy + 1);
      }
    },
    scores(f, meta) {
      const n = new Array(meta.players).fill(0);
      for (const u of f.units) n[u[1]] += 1;
      return n;
    },
    events(fr, meta) {
      const f = fr.frame;
      const out = [`turn ${f.turn}` + (f.winner === null || f.winner === undefined ? `, ${meta.names[f.to_move]} to move` : "")];
      out.push(`guards in reserve ${f.reserves.join(" / ")}; next spawns ${f.next_spawn.join(" / ")}`);
      return out;
    },
    legend(meta) {
      const [a, b] = meta.names;
      return [
        [C.seat0, `${a}: unit (F fighter, P paver, C cleaner, S shooter, D shield); square: guard`],
        [C.seat1, `${b}: unit; square: guard`],
        [C.cb_red, `${a}'s block`], [C.cb_blue, `${b}'s block`],
        [C.cb_objective_red, `${a}'s objective`], [C.cb_objective_blue, `${b}'s objective`],
        [C.cb_spawn_red, `${a}'s spawn`], [C.cb_spawn_blue, `${b}'s spawn`],
        [C.cb_neutral, "neutral"], [C.cb_true_neutral, "true neutral"], [C.cb_dead, "dead"],
      ];
    },
    describe(f, x, y, meta) {
      if (x < 0 || y < 0 || x >= f.width || y >= f.height) return "";
      const u = f.units.find((u) => u[3] === x && u[4] === y);
      const block = NAMES[P.bytes(f.board)[y * f.width + x]].slice(3).replace("_", " ");
      return `(${x}, ${y}) ${block}` + (u ? `, ${meta.names[u[1]]}'s ${u[2]} #${u[0]}` : "");
    },
  };
})();
