"""The tournament results pages render from Jinja2 templates (arena/web/templates/), autoescaped: what
a bot author names (a bot, a map, a reason) is shown as text, never read as markup. The browser test
(test_web_results.py) checks the same pages against a real tournament."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest

from cellarena.arena.results import MatchRow, RatingPoint, SeatRow
from cellarena.arena.tournament_store import Standing
from cellarena.arena.web.pages import index_html, tournament_html

EVIL = '<script>alert("x")</script>'


class FakeSource:
    """A `ResultsSource` whose names are hostile."""

    title = f"cup {EVIL}"
    game = "drop2df"

    def standings(self) -> list[Standing]:
        return [
            Standing(EVIL, 12.5, 25.0, 4.17, 2, 1, 0, 1, 0.125, 1),
            Standing("plain", 1.0, 20.0, 6.33, 2, 1, 0, 1, 0.0, 0),
        ]

    def matches(self) -> list[MatchRow]:
        seats = (
            SeatRow(EVIL, 1, 3, 1, 2, forfeit=False, crashed=True),
            SeatRow("plain", 2, 0, 0, 0, forfeit=True, crashed=False),
        )
        return [
            MatchRow(0, "k0", 1, f"map {EVIL}", EVIL, f"because {EVIL}", 40, Path("/r/0.replay"), "t", seats),
            MatchRow(1, "k1", 1, None, None, "a draw", 41, None, "t", seats[::-1]),
        ]

    def match(self, index: int) -> MatchRow | None:
        return next((m for m in self.matches() if m.index == index), None)

    def rating_history(self) -> list[RatingPoint]:
        return [RatingPoint(0, EVIL, 12.5), RatingPoint(0, "plain", 1.0)]


class _Text(HTMLParser):
    """The page's text and the attributes of its elements, as a browser would read them."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _read(html: str) -> _Text:
    parser = _Text()
    parser.feed(html)
    return parser


def test_the_tournament_page_shows_hostile_names_as_text() -> None:
    html = tournament_html("cup.1", FakeSource())
    assert "<script>alert" not in html  # every name escaped, in text and attributes alike
    page = _read(html)
    text = "".join(page.text)
    assert f"cup {EVIL}: drop2df" in text and f"map {EVIL}" in text and f"because {EVIL}" in text
    rows = [a for tag, a in page.tags if tag == "tr" and "data-bot" in a]
    assert [a["data-bot"] for a in rows] == [EVIL, "plain"]
    assert [a["data-match"] for tag, a in page.tags if tag == "tr" and "data-match" in a] == ["0", "1"]
    assert "12.50" in text and "12.50%" in text and "crashed" in text and "forfeit" in text
    assert "3 / 1 / 2" in text and "draw" in text
    # One match has a replay (thumbnail and links under its id), the other says it has none.
    canvases = [a for tag, a in page.tags if tag == "canvas"]
    assert [c["data-final"] for c in canvases] == ["/api/replays/cup.1.0/final"]
    links = [a["href"] for tag, a in page.tags if tag == "a"]
    assert "/replays/cup.1.0/" in links and "/api/replays/cup.1.0/file" in links
    assert "no replay" in text
    # The chart is the code's own SVG, kept as markup; its names are escaped inside it.
    paths = [a for tag, a in page.tags if tag == "path"]
    assert [p["data-bot"] for p in paths] == [EVIL, "plain"]
    assert ("script", {"src": "/static/games/drop2df.js"}) in page.tags


def test_the_list_of_tournaments_links_each_by_its_quoted_id() -> None:
    html = index_html({"a b": FakeSource()})
    assert "<script>alert" not in html
    page = _read(html)
    assert [a["href"] for tag, a in page.tags if tag == "a"] == ["/t/a%20b/"]
    assert f"cup {EVIL}" in "".join(page.text)


def test_a_name_the_template_is_not_given_is_an_error_not_a_blank() -> None:
    from jinja2 import UndefinedError

    from cellarena.arena.web.pages import PACKAGE
    from cellarena.server.web.templating import render

    with pytest.raises(UndefinedError):
        render("tournaments.html", PACKAGE, title="tournaments")
