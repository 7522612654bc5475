// Thumbnails of final boards: every <canvas data-final="URL"> gets the match's last frame, drawn by the
// game's module, when it scrolls into view.
"use strict";
(function () {
  const P = window.CellarenaPalette, G = window.CellarenaGame;
  async function draw(canvas) {
    const r = await fetch(canvas.dataset.final, { headers: { accept: "application/json" } });
    const body = await r.json();
    if (!r.ok) { canvas.title = body.error || "no picture"; canvas.classList.add("broken"); return; }
    const [w, h] = G.size(body.frame, {});
    const off = document.createElement("canvas");
    off.width = w; off.height = h;
    const octx = off.getContext("2d");
    const img = octx.createImageData(w, h);
    G.paint(body.frame, img.data, {});
    octx.putImageData(img, 0, 0);
    const ctx = canvas.getContext("2d");
    const s = Math.min(canvas.width / w, canvas.height / h);
    ctx.fillStyle = P.colors.background;
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    ctx.imageSmoothingEnabled = s < 1;
    ctx.drawImage(off, (canvas.width - w * s) / 2, (canvas.height - h * s) / 2, w * s, h * s);
    canvas.dataset.drawn = "1";
  }
  const seen = new IntersectionObserver((entries) => {
    for (const e of entries) if (e.isIntersecting) { seen.unobserve(e.target); draw(e.target); }
  });
  document.querySelectorAll("canvas[data-final]").forEach((c) => seen.observe(c));
})();
