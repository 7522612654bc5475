"""The rating-over-matches chart: an inline SVG, one line per bot, drawn on the server (no script)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from cellarena.arena.web.results_source import RatingPoint

#: The viewer's seat colours (server/web/static/palette.js): Okabe-Ito, safe for colour-blind readers.
COLORS = ("#E69F00", "#56B4E9", "#009E73", "#F0E442", "#7788EE", "#EE5511", "#BBEE99", "#64DADE")
W, H = 720, 260
LEFT, RIGHT, TOP, BOTTOM = 48, 150, 14, 30


def color_of(index: int) -> str:
    return COLORS[index % len(COLORS)]


def rating_chart(points: Sequence[RatingPoint], bots: Sequence[str]) -> str:
    """SVG of each bot's conservative rating (mu - 3 sigma) after each of its matches, by match order."""
    if not points:
        return '<p class="dim">No finished matches yet.</p>'
    order = sorted({p.match for p in points})
    x_of = {m: i for i, m in enumerate(order)}
    lo = min(0.0, *(p.rating for p in points))
    hi = max(p.rating for p in points)
    hi = hi if hi > lo else lo + 1
    span_x = max(1, len(order) - 1)

    def x(m: int) -> float:
        return LEFT + (W - LEFT - RIGHT) * x_of[m] / span_x

    def y(v: float) -> float:
        return TOP + (H - TOP - BOTTOM) * (1 - (v - lo) / (hi - lo))

    out = [
        f'<svg class="chart" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" '
        'aria-label="rating after each match, per bot">'
    ]
    for i in range(5):  # grid and y labels
        v = lo + (hi - lo) * i / 4
        out.append(
            f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y(v):.1f}" y2="{y(v):.1f}" class="grid"/>'
            f'<text x="{LEFT - 6}" y="{y(v) + 4:.1f}" class="axis" text-anchor="end">{v:.1f}</text>'
        )
    out.append(
        f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 6}" class="axis" text-anchor="middle">'
        f"matches, in the order they count ({len(order)})</text>"
    )
    for n, bot in enumerate(bots):
        mine = [p for p in points if p.bot == bot]
        if not mine:
            continue
        c = color_of(n)
        path = " ".join(
            f"{'M' if i == 0 else 'L'}{x(p.match):.1f},{y(p.rating):.1f}" for i, p in enumerate(mine)
        )
        out.append(f'<path d="{path}" fill="none" stroke="{c}" stroke-width="2" data-bot="{escape(bot)}"/>')
        for p in mine:
            out.append(
                f'<circle cx="{x(p.match):.1f}" cy="{y(p.rating):.1f}" r="2.5" fill="{c}">'
                f"<title>{escape(bot)}: {p.rating:.2f} after match {p.match}</title></circle>"
            )
        ly = TOP + 16 * n + 8
        out.append(
            f'<rect x="{W - RIGHT + 12}" y="{ly - 8}" width="10" height="10" fill="{c}"/>'
            f'<text x="{W - RIGHT + 28}" y="{ly + 1}" class="label">{escape(bot)}</text>'
        )
    out.append("</svg>")
    return "".join(out)
