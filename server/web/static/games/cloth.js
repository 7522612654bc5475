// Cloth of Gold: one pixel per cell; empty cells tinted by whose territory they are in.
"use strict";
(function () {
  const P = window.CellarenaPalette, C = P.colors;
  C.cloth_a = C.seat0; C.cloth_b = C.seat1;
  C.cloth_neutral = "#a8a8a8"; C.cloth_dead = "#5b4a63";
  C.cloth_empty = "#17191e"; C.cloth_terr_a = P.mix(C.seat0, "#17191e", 0.72);
  C.cloth_terr_b = P.mix(C.seat1, "#17191e", 0.72); C.cloth_terr_ab = "#4a4a50";
  const EMPTY = ["cloth_empty", "cloth_terr_a", "cloth_terr_b", "cloth_terr_ab"];
  const CELL = [null, "cloth_a", "cloth_b", "cloth_neutral", "cloth_dead"];
  const rgb = {};
  for (const k of [...EMPTY, ...CELL.slice(1)]) rgb[k] = P.hex(C[k]);
  // (cell code << 2 | territory) -> pixel word
  const lut = new Uint32Array(8 << 2);
  for (let c = 0; c < 8; c++) for (let t = 0; t < 4; t++) {
    lut[(c << 2) | t] = P.word(rgb[c ? CELL[c] || "cloth_dead" : EMPTY[t]]);
  }
  function nameAt(cells, terr, i) {
    const c = cells[i];
    return c ? CELL[c] || "cloth_dead" : EMPTY[terr[i] & 3];
  }
  window.CellarenaGame = {
    scoreLabel: "score",
    nameAt(f, x, y) { return nameAt(P.bytes(f.cells), P.bytes(f.territory), y * f.width + x); },
    size: (f) => [f.width, f.height],
    paint(f, out) {
      const cells = P.bytes(f.cells), terr = P.bytes(f.territory);
      const px = new Uint32Array(out.buffer, out.byteOffset, cells.length);
      for (let i = 0, n = cells.length; i < n; i++) px[i] = lut[(cells[i] << 2) | (terr[i] & 3)];
    },
    scores: (f) => f.scores,
    // Frames between decision points (a round's generations) name theirs.
    subName: (f) => `generation ${f.generation} of ${f.generations}`,
    events(fr, meta) {
      const f = fr.frame;
      if (f.generation !== undefined) {
        return [`round ${f.round}: generation ${f.generation} of ${f.generations}` +
          (f.generation === 0 ? " (the units just placed)" : "") + `; units ${f.units.join(" / ")}`];
      }
      const who = f.to_place === null || f.to_place === undefined ? "" : `, ${meta.names[f.to_place] ?? f.to_place} to place`;
      return [`round ${f.round}${who}; units ${f.units.join(" / ")}`];
    },
    legend(meta) {
      return [
        [C.cloth_a, `${meta.names[0]}: cell (a)`], [C.cloth_b, `${meta.names[1]}: cell (b)`],
        [C.cloth_terr_a, `${meta.names[0]}'s territory`], [C.cloth_terr_b, `${meta.names[1]}'s territory`],
        [C.cloth_terr_ab, "both territories"], [C.cloth_neutral, "neutral cell (c)"],
        [C.cloth_dead, "killed cell (d)"], [C.cloth_empty, "empty"],
      ];
    },
    describe(f, x, y) {
      if (x < 0 || y < 0 || x >= f.width || y >= f.height) return "";
      const words = { cloth_a: "cell a", cloth_b: "cell b", cloth_neutral: "neutral cell", cloth_dead: "killed cell",
        cloth_empty: "empty", cloth_terr_a: "empty, a's territory", cloth_terr_b: "empty, b's territory",
        cloth_terr_ab: "empty, both territories" };
      return `(${x}, ${y}) ${words[this.nameAt(f, x, y)]}`;
    },
  };
})();
