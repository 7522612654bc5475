// C.A.T.A.: the board in black and white (the cells' own colours), health and the rule beside it.
"use strict";
(function () {
  const P = window.CellarenaPalette, C = P.colors;
  C.cata_black = "#202226"; C.cata_white = "#e9e6df";
  const table = { 0: P.hex(C.cata_black), 1: P.hex(C.cata_white), fallback: P.hex(C.oob) };
  function board(f) {
    if (f._board) return f._board;
    const packed = P.bytes(f.board), n = f.size * f.size, out = new Uint8Array(n);
    for (let i = 0; i < n; i++) out[i] = (packed[i >> 3] >> (7 - (i & 7))) & 1;
    Object.defineProperty(f, "_board", { value: out });
    return out;
  }
  window.CellarenaGame = {
    scoreLabel: "health",
    board,
    size: (f) => [f.size, f.size],
    paint(f, out) { P.fill(out, board(f), table); },
    scores: (f) => f.health.map((v) => (v / f.cells_per_hp).toFixed(2)),
    events(fr, meta) {
      const f = fr.frame;
      const rule = (a, b) => f.rule.slice(a, b).map((v) => (v ? "#" : ".")).join("");
      const out = [`turn ${f.turn}, move ${f.move}` + (f.to_move === null ? "" : `, ${meta.names[f.to_move]} to move`),
        `rule: black ${rule(0, 16)} · white ${rule(16, 32)}`];
      const r = f.last_reaction;
      // A reaction that ends the match (health at 0, the turn cap) stops after its tally: no run.
      const run = r && (r.generations === undefined ? "the match ended before its run"
        : `${r.generations} generations, ended ${r.ended}`);
      if (r) out.push(`last reaction (turn ${r.turn}): ${run}` + (r.tally ? `, tally ${r.tally.join(" / ")}` : ""));
      return out;
    },
    legend(meta) {
      return [[C.cata_black, `black cell: ${meta.names[0]}'s colour`], [C.cata_white, `white cell: ${meta.names[1]}'s colour`]];
    },
    describe(f, x, y) {
      if (x < 0 || y < 0 || x >= f.size || y >= f.size) return "";
      return `(${x}, ${y}) ${board(f)[y * f.size + x] ? "white" : "black"}`;
    },
  };
})();
