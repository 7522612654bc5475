"""A small SMTP client on trio's streams (issue 42): the ladder's mail goes out without a thread.

One message per connection: the greeting, EHLO, STARTTLS (`trio.SSLStream`) or TLS from the first byte
(``tls``, port 465), AUTH PLAIN or LOGIN when a user is given, MAIL FROM, RCPT TO, DATA with its
lines dot-stuffed, QUIT. Every step runs under its own deadline (`SmtpSettings.step_timeout`), and
every reply is read whole (``250-...`` lines up to ``250 ...``). A refusal is one `SmtpError` that names
the step and quotes the server's reply; ``permanent`` is set for 5xx replies, which sending again would
not change. A password is never sent over a connection that is not encrypted, unless the server is on
this machine (``none`` is for a relay on loopback only), and never appears in an error.
"""

from __future__ import annotations

import base64
import contextlib
import email.policy
import ssl
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Literal

import trio

from cellarena.sdk.client import is_loopback

TlsMode = Literal["starttls", "tls", "none"]
TLS_MODES: tuple[TlsMode, ...] = ("starttls", "tls", "none")
#: The longest reply line read (RFC 5321 allows 512 bytes; servers write longer) and reply.
MAX_LINE = 8192
MAX_REPLY_LINES = 100


class SmtpError(Exception):
    """A mail not sent: ``step`` (``connect``, ``STARTTLS``, ``RCPT TO <a@b>``...) and why."""

    def __init__(self, server: str, step: str, why: str, *, permanent: bool = False) -> None:
        super().__init__(f"SMTP server {server}: {step}: {why}")
        self.step = step
        self.permanent = permanent


@dataclass(frozen=True)
class SmtpSettings:
    """Where and how the ladder's mail is sent (`cellarena ladder web --smtp-*`)."""

    host: str
    port: int
    sender: str
    tls: TlsMode = "starttls"
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    #: Each step's deadline (connecting, each command and its reply, the TLS handshake).
    step_timeout: float = 30.0
    #: The certificates trusted for the server (None: the system's CAs).
    context: ssl.SSLContext | None = field(default=None, repr=False, compare=False)
    #: The name this client gives in EHLO.
    local_name: str = "localhost"

    @property
    def server(self) -> str:
        return f"{self.host}:{self.port}"

    def tls_context(self) -> ssl.SSLContext:
        return self.context if self.context is not None else ssl.create_default_context()


def check_settings(settings: SmtpSettings) -> None:
    """A ValueError naming the option at fault: plain SMTP off this machine, or a password without a user."""
    if settings.tls == "none" and not is_loopback(settings.host):
        raise ValueError(
            f"--smtp-tls none sends mail (and any password) in the clear: only to a relay on this machine "
            f"(127.0.0.1, ::1, localhost), not {settings.host}; use starttls or tls"
        )
    if (settings.user is None) != (settings.password is None):
        raise ValueError("give --smtp-user and --smtp-password-file together, or neither")


class _Conversation:
    """One connection: commands written, replies read whole, each under the step's deadline."""

    def __init__(self, settings: SmtpSettings, stream: trio.abc.Stream) -> None:
        self.settings = settings
        self.stream = stream
        self.buffer = bytearray()

    def error(self, step: str, why: str, *, permanent: bool = False) -> SmtpError:
        return SmtpError(self.settings.server, step, why, permanent=permanent)

    async def _line(self, step: str) -> bytes:
        while b"\n" not in self.buffer:
            if len(self.buffer) > MAX_LINE:
                raise self.error(step, f"a reply line longer than {MAX_LINE} bytes")
            data = await self.stream.receive_some(4096)
            if not data:
                raise self.error(step, "the server closed the connection")
            self.buffer += data
        end = self.buffer.index(b"\n")
        line = bytes(self.buffer[:end]).rstrip(b"\r")
        del self.buffer[: end + 1]
        return line

    async def reply(self, step: str) -> tuple[int, list[str]]:
        """The code and text lines of the next reply (a multi-line one read to its last line)."""
        lines: list[str] = []
        while len(lines) < MAX_REPLY_LINES:
            raw = await self._line(step)
            code, more = raw[:3], raw[3:4]
            if not code.isdigit() or more not in (b"", b" ", b"-"):
                raise self.error(step, f"not an SMTP reply: {raw[:100]!r}")
            lines.append(raw[4:].decode("utf-8", "replace"))
            if more != b"-":
                return int(code), lines
        raise self.error(step, f"a reply of more than {MAX_REPLY_LINES} lines")

    async def step(self, step: str, command: bytes | None, *expected: int) -> list[str]:
        """Send ``command`` (None: only read, as the greeting), and its reply, which must be one of
        ``expected``: else an `SmtpError` quoting it (permanent for 5xx)."""
        try:
            with trio.fail_after(self.settings.step_timeout):
                if command is not None:
                    await self.stream.send_all(command + b"\r\n")
                code, lines = await self.reply(step)
        except trio.TooSlowError:
            raise self.error(step, f"no answer within {self.settings.step_timeout:g} s") from None
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise self.error(step, f"the connection failed ({exc or type(exc).__name__})") from None
        if code not in expected:
            said = " / ".join(line for line in lines if line) or "(no text)"
            raise self.error(step, f"refused: {code} {said[:300]}", permanent=500 <= code < 600)
        return lines

    async def ehlo(self) -> dict[str, str]:
        """The extensions the server offers, by keyword (``STARTTLS``, ``AUTH``: ``PLAIN LOGIN``...)."""
        lines = await self.step("EHLO", b"EHLO " + self.settings.local_name.encode("ascii", "replace"), 250)
        offered = {}
        for line in lines[1:]:
            keyword, _, params = line.partition(" ")
            offered[keyword.upper()] = params.upper()
        return offered

    async def start_tls(self, step: str) -> None:
        """The rest of the conversation over TLS, the server's certificate checked for its host name."""
        if self.buffer:
            raise self.error(step, "the server sent more than its reply before TLS began")
        tls = trio.SSLStream(
            self.stream,
            self.settings.tls_context(),
            server_hostname=self.settings.host,
            https_compatible=True,
        )
        try:
            with trio.fail_after(self.settings.step_timeout):
                await tls.do_handshake()
        except trio.TooSlowError:
            raise self.error(step, f"no TLS handshake within {self.settings.step_timeout:g} s") from None
        except (trio.BrokenResourceError, ssl.SSLError, OSError) as exc:
            cause = exc.__cause__ or exc
            raise self.error(step, f"the TLS handshake failed ({cause})") from None
        self.stream = tls

    async def authenticate(self, offered: dict[str, str], encrypted: bool) -> None:
        user, password = self.settings.user, self.settings.password
        if user is None or password is None:
            return
        if not encrypted and not is_loopback(self.settings.host):
            raise self.error("AUTH", "refusing to send the password over a connection that is not encrypted")
        mechanisms = offered.get("AUTH", "").split()
        if "PLAIN" in mechanisms:
            plain = base64.b64encode(f"\0{user}\0{password}".encode()).decode("ascii")
            await self.step("AUTH PLAIN", f"AUTH PLAIN {plain}".encode("ascii"), 235)
        elif "LOGIN" in mechanisms:
            await self.step("AUTH LOGIN", b"AUTH LOGIN", 334)
            await self.step("AUTH LOGIN (user)", base64.b64encode(user.encode()), 334)
            await self.step("AUTH LOGIN (password)", base64.b64encode(password.encode()), 235)
        else:
            raise self.error(
                "AUTH",
                f"the server offers no login this client speaks (it offers {mechanisms or 'none'}; "
                "PLAIN and LOGIN are spoken)",
                permanent=True,
            )


def message_bytes(message: EmailMessage) -> bytes:
    """The message as DATA carries it: CRLF line ends, each line that starts with a dot doubled, and the
    closing line of one dot."""
    data = message.as_bytes(policy=email.policy.SMTP)
    if not data.endswith(b"\r\n"):
        data += b"\r\n"
    lines = [b"." + line if line.startswith(b".") else line for line in data.split(b"\r\n")[:-1]]
    return b"\r\n".join([*lines, b"."]) + b"\r\n"


async def _connect(settings: SmtpSettings) -> _Conversation:
    try:
        with trio.fail_after(settings.step_timeout):
            stream: trio.abc.Stream = await trio.open_tcp_stream(settings.host, settings.port)
    except trio.TooSlowError:
        raise SmtpError(
            settings.server, "connect", f"no connection within {settings.step_timeout:g} s"
        ) from None
    except OSError as exc:
        raise SmtpError(settings.server, "connect", f"cannot connect ({exc.strerror or exc})") from None
    talk = _Conversation(settings, stream)
    if settings.tls == "tls":
        await talk.start_tls("TLS")
    return talk


async def send_mail(settings: SmtpSettings, message: EmailMessage, recipients: list[str]) -> None:
    """Send ``message`` to ``recipients`` through the server of ``settings``; `SmtpError` if it is not
    taken (the server's reply quoted, the step named)."""
    talk = await _connect(settings)
    try:
        await talk.step("greeting", None, 220)
        offered = await talk.ehlo()
        if settings.tls == "starttls":
            if "STARTTLS" not in offered:
                raise talk.error(
                    "STARTTLS",
                    "the server does not offer STARTTLS: give --smtp-tls tls and its TLS port (465), "
                    "or a server that offers it",
                    permanent=True,
                )
            await talk.step("STARTTLS", b"STARTTLS", 220)
            await talk.start_tls("STARTTLS")
            offered = await talk.ehlo()
        await talk.authenticate(offered, encrypted=settings.tls != "none")
        await talk.step("MAIL FROM", f"MAIL FROM:<{settings.sender}>".encode(), 250)
        for to in recipients:
            await talk.step(f"RCPT TO <{to}>", f"RCPT TO:<{to}>".encode(), 250, 251)
        await talk.step("DATA", b"DATA", 354)
        await talk.step("the message", message_bytes(message).removesuffix(b"\r\n"), 250)
        with contextlib.suppress(SmtpError):  # the message was taken: a hang-up now changes nothing
            await talk.step("QUIT", b"QUIT", 221)
    finally:
        with trio.move_on_after(settings.step_timeout) as cleanup:
            cleanup.shield = True
            await talk.stream.aclose()
