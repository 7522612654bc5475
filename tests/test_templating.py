"""Pages render through one Jinja2 environment that escapes every value it is given."""

from __future__ import annotations

import pytest
from jinja2 import UndefinedError

from cellarena.server.web.templating import environment, render


def test_a_value_is_escaped_unless_marked_safe() -> None:
    html = render("error.html", title="<t>", message="<script>alert(1)</script>", hint="a & b")
    assert "<script>alert(1)" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<title>&lt;t&gt; · cellarena</title>" in html
    assert "a &amp; b" in html


def test_a_name_the_code_forgot_is_an_error_not_a_blank() -> None:
    with pytest.raises(UndefinedError):
        render("error.html", title="x", hint="")


def test_every_package_shares_one_environment() -> None:
    assert environment() is environment()
    assert environment().autoescape is True
