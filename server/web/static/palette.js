// Colours shared by every game's drawing. Seats 0-3 use the Okabe-Ito palette, which stays
// distinguishable under the common colour-vision deficiencies; seats 4-7 (Rezzo maps have up to 8)
// were searched for to stay apart from every other cell colour, and from each other under simulated
// protanopia, deuteranopia and tritanopia. Board states take hues no seat has (a grey-mauve wire, a
// violet tail, a pink photon), so that none is taken for a seat's base, geyser or flag
// (tests/test_web_newcomer.py measures every pair, CIEDE2000, for 2 to 8 seats).
"use strict";
(function () {
  const seats = ["#E69F00", "#56B4E9", "#009E73", "#F0E442", "#7788EE", "#EE5511", "#BBEE99", "#64DADE"];
  function hex(c) {
    return [parseInt(c.slice(1, 3), 16), parseInt(c.slice(3, 5), 16), parseInt(c.slice(5, 7), 16)];
  }
  function mix(c, other, t) {
    const a = hex(c), b = hex(other);
    const m = a.map((v, i) => Math.round(v + (b[i] - v) * t));
    return "#" + m.map((v) => v.toString(16).padStart(2, "0")).join("");
  }
  const colors = {
    background: "#101216",
    blank: "#1c1f25",
    conductor: "#8a7f8f",
    electron: "#ffffff",
    tail: "#b05cc8",
    photon: "#ff9ff3",
    oob: "#4a1020",
    grid: "#2a2e36",
  };
  seats.forEach((c, s) => {
    colors["seat" + s] = c;
    colors["agent" + s] = c;
    colors["base" + s] = mix(c, "#000000", 0.5);
    colors["geyser" + s] = mix(c, "#000000", 0.28);
    colors["flag" + s] = mix(c, "#ffffff", 0.45);
    colors["territory" + s] = mix(c, "#101216", 0.78);
  });
  // A bytes field of a frame ({"b64": ...}) as a Uint8Array, decoded once.
  function bytes(field) {
    if (!field || typeof field.b64 !== "string") return field;
    if (field._bytes) return field._bytes;
    const s = atob(field.b64);
    const out = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
    Object.defineProperty(field, "_bytes", { value: out });
    return out;
  }
  // An opaque pixel as one little-endian 32-bit word (the layout of ImageData on every browser we target).
  function word(c) { return (255 << 24 | c[2] << 16 | c[1] << 8 | c[0]) >>> 0; }
  // Fill a w*h RGBA buffer from a byte plane through a table of [r, g, b] per code: one word per pixel.
  function fill(out, plane, table) {
    let lut = table._lut;
    if (!lut) {
      lut = new Uint32Array(256).fill(word(table.fallback));
      for (const [k, c] of Object.entries(table)) if (/^\d+$/.test(k)) lut[Number(k)] = word(c);
      Object.defineProperty(table, "_lut", { value: lut });
    }
    const px = new Uint32Array(out.buffer, out.byteOffset, plane.length);
    for (let i = 0, n = plane.length; i < n; i++) px[i] = lut[plane[i]];
  }
  window.CellarenaPalette = { seats, colors, hex, mix, bytes, fill, word };
})();
