"""`cellarena ladder web --signup ...` started for real over HTTPS (a trustme CA), and a client for its
forms: cookies as a browser keeps them (Secure ones over HTTPS only), the hidden CSRF field read from
each page, and an Origin header as a browser sends with a form."""

from __future__ import annotations

import http.cookiejar
import re
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

from cellarena_cli import Served, served
from certificates import pem_files

URL = re.compile(r"at (https://\S+)")
CSRF = re.compile(r'name=csrf value="([^"]+)"')


@dataclass
class Pages:
    url: str
    ca: Path
    folder: Path
    server: Served

    @property
    def proc(self) -> subprocess.Popen[str]:
        return self.server.proc

    def stderr(self) -> str:
        """What `ladder web` has written to stderr so far (all of it once `ladder_pages` is left)."""
        return self.server.stderr()


@contextmanager
def ladder_pages(folder: Path, *args: str) -> Iterator[Pages]:
    """The pages of the ladder in ``folder`` (its database made first), with ``args`` (``--signup``...)."""
    from cellarena.arena.ladder.store.ladder_store import LadderStore

    LadderStore(folder / "ladder.sqlite").close()
    ca, chain, key = pem_files(folder, "localhost", "127.0.0.1")
    with served(
        "ladder", "--dir", str(folder), "web", "rezzo", "--port", "0",
        "--tls-cert", str(chain), "--tls-key", str(key), *args, url=URL,
    ) as server:  # fmt: skip
        yield Pages(server.url.rstrip("/"), ca, folder, server)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kw: object) -> None:
        return None


@dataclass
class Answer:
    status: int
    body: str
    headers: dict[str, str]


class Browser:
    """A cookie jar and the last page's CSRF field; posts carry ``origin`` (this site's, unless told)."""

    def __init__(self, pages: Pages) -> None:
        self.pages = pages
        self.jar = http.cookiejar.CookieJar()
        context = ssl.create_default_context(cafile=str(pages.ca))
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPSHandler(context=context),
            urllib.request.HTTPCookieProcessor(self.jar),
            _NoRedirect(),
        )
        self.csrf = ""

    def request(self, path: str, data: bytes | None = None, headers: dict[str, str] | None = None) -> Answer:
        req = urllib.request.Request(self.pages.url + path, data=data, headers=headers or {})
        try:
            with self.opener.open(req, timeout=30) as answer:
                out = Answer(answer.status, answer.read().decode(), dict(answer.headers))
        except urllib.error.HTTPError as exc:
            out = Answer(exc.code, exc.read().decode(), dict(exc.headers))
        found = CSRF.search(out.body)
        if found:
            self.csrf = found.group(1)
        return out

    def get(self, path: str) -> Answer:
        return self.request(path)

    def post(
        self, path: str, fields: dict[str, str], *, origin: str | None = "", csrf: str | None = ""
    ) -> Answer:
        body = dict(fields)
        token = self.csrf if csrf == "" else csrf
        if token is not None:
            body["csrf"] = token
        headers = {"content-type": "application/x-www-form-urlencoded"}
        sent = self.pages.url if origin == "" else origin
        if sent is not None:
            headers["origin"] = sent
        return self.request(path, urlencode(body).encode(), headers)

    def session_cookie(self) -> str | None:
        return next((c.value for c in self.jar if c.name == "cellarena_session"), None)
