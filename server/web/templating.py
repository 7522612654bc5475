"""Pages from Jinja2 templates, escaped by default.

Every page of the viewer, the results pages and the ladder renders through one `Environment` whose
autoescape is on for every template: a bot name, a map name or an error text is data, and a page
that forgets to escape one is a script injection on a public ladder. Trusted HTML (a chart the
code drew) must say so with ``|safe`` or `markupsafe.Markup`, which a reviewer can grep for.

Templates live in a ``templates/`` folder of the package that owns the page; `environment` chains
those packages' folders, first match wins, and every one can extend ``base.html`` from here.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from jinja2 import ChoiceLoader, Environment, PackageLoader, StrictUndefined


@cache
def environment(*packages: str) -> Environment:
    """One shared environment over ``packages``' templates and this package's (searched last).

    `StrictUndefined`: a name the code forgot to pass is an error in the tests, not a blank on a page.
    """
    loaders = [PackageLoader(p, "templates") for p in (*packages, "cellarena.server.web")]
    return Environment(
        loader=ChoiceLoader(loaders),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render(template: str, *packages: str, **context: Any) -> str:
    """``template`` rendered with ``context``, looked up in ``packages`` then the viewer's own."""
    return environment(*packages).get_template(template).render(**context)
