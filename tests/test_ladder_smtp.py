"""The ladder's SMTP client (issue 42) against a real local SMTP server (aiosmtpd, `smtp_server.py`, one
process for the module): plain to loopback, STARTTLS with a certificate of the tests' own CA and a
login, TLS from the first byte, that CA trusted by `--smtp-ca-file`, refusals named by their step;
and, without a server, the reply parser, the dot-stuffing and the deadlines (in virtual time)."""

from __future__ import annotations

import email
import email.policy
import json
import ssl
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from certificates import pem_files
from smtp_server import PASSWORD, USER, SmtpServer

from cellarena.arena.cli.ladder.mail_options import mail_settings
from cellarena.arena.ladder.accounts.smtp import (
    SmtpError,
    SmtpSettings,
    _Conversation,
    check_settings,
    message_bytes,
    send_mail,
)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """The tests' own CA, and the server's chain and key, which that CA signed."""
    return pem_files(tmp_path_factory.mktemp("smtp-tls"), "localhost", "127.0.0.1")


@pytest.fixture(scope="module")
def smtp(
    tmp_path_factory: pytest.TempPathFactory, certificates: tuple[Path, Path, Path]
) -> Iterator[tuple[SmtpServer, ssl.SSLContext]]:
    folder = tmp_path_factory.mktemp("smtp")
    ca, chain, key = certificates
    server = SmtpServer(folder / "mail", chain, key)
    try:
        yield server, ssl.create_default_context(cafile=str(ca))
    finally:
        server.stop()


def _message(to: str, body: str = "Hello.\n") -> EmailMessage:
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "ladder@localhost", to, "a test"
    message.set_content(body)
    return message


def _arrived(server: SmtpServer, to: str) -> tuple[EmailMessage, dict[str, object]]:
    """The one message the server took for ``to``, and what it knew of its connection."""
    found = []
    for path in server.messages():
        about = json.loads(path.with_suffix(".json").read_text())
        if to in about["to"]:
            found.append((email.message_from_bytes(path.read_bytes(), policy=email.policy.default), about))
    assert len(found) == 1, f"{len(found)} messages for {to}"
    message, about = found[0]
    assert isinstance(message, EmailMessage)
    return message, about


async def test_plain_to_loopback_with_dot_stuffing(smtp: tuple[SmtpServer, ssl.SSLContext]) -> None:
    server, _ = smtp
    settings = SmtpSettings("127.0.0.1", server.ports["plain"], "ladder@localhost", tls="none")
    body = "First line.\n.a line that starts with a dot\n..two dots\n.\nlast\n"
    await send_mail(settings, _message("plain@example.org", body), ["plain@example.org"])  # dots doubled
    message, about = _arrived(server, "plain@example.org")
    assert message.get_content().replace("\r\n", "\n") == body
    assert about == {"from": "ladder@localhost", "to": ["plain@example.org"], "tls": False, "login": False}


async def test_starttls_with_a_self_signed_certificate_and_a_login(
    smtp: tuple[SmtpServer, ssl.SSLContext],
) -> None:
    server, trusted = smtp
    settings = SmtpSettings(
        "localhost", server.ports["starttls"], "ladder@x.org", user=USER, password=PASSWORD, context=trusted
    )
    await send_mail(settings, _message("tls@example.org"), ["tls@example.org"])
    _, about = _arrived(server, "tls@example.org")
    assert about["tls"] is True and about["login"] is True
    assert PASSWORD not in repr(settings)


async def test_tls_from_the_first_byte(smtp: tuple[SmtpServer, ssl.SSLContext]) -> None:
    server, trusted = smtp
    settings = SmtpSettings("localhost", server.ports["tls"], "ladder@localhost", tls="tls", context=trusted)
    await send_mail(settings, _message("465@example.org"), ["465@example.org"])
    assert _arrived(server, "465@example.org")[1]["tls"] is True


async def test_a_private_ca_named_by_smtp_ca_file_is_trusted_for_starttls_and_tls(
    smtp: tuple[SmtpServer, ssl.SSLContext], certificates: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    server, _ = smtp
    ca, _, _ = certificates
    secret = tmp_path / "smtp.password"
    secret.write_text(PASSWORD + "\n")
    secret.chmod(0o600)
    options: dict[str, Any] = {
        "smtp_host": "localhost",
        "smtp_port": server.ports["starttls"],
        "smtp_tls": "starttls",
        "smtp_ca_file": ca,
        "smtp_user": USER,
        "smtp_password_file": secret,
        "mail_from": None,
        "verify_email": False,
    }
    starttls = mail_settings(options, "open")  # what `ladder web --smtp-ca-file CA.pem` sends with
    await send_mail(starttls, _message("ca-starttls@example.org"), ["ca-starttls@example.org"])
    assert _arrived(server, "ca-starttls@example.org")[1] == {
        "from": "ladder@localhost", "to": ["ca-starttls@example.org"], "tls": True, "login": True,
    }  # fmt: skip
    implicit = mail_settings(
        {
            **options,
            "smtp_tls": "tls",
            "smtp_port": server.ports["tls"],
            "smtp_user": None,
            "smtp_password_file": None,
        },
        "open",
    )
    await send_mail(implicit, _message("ca-tls@example.org"), ["ca-tls@example.org"])
    assert _arrived(server, "ca-tls@example.org")[1]["tls"] is True
    another_ca, _, _ = pem_files(tmp_path, "localhost")  # a CA that did not sign the server's certificate
    other = mail_settings({**options, "smtp_ca_file": another_ca}, "open")
    with pytest.raises(SmtpError, match=r"STARTTLS: the TLS handshake failed .*CERTIFICATE_VERIFY_FAILED"):
        await send_mail(other, _message("x@example.org"), ["x@example.org"])


async def test_refusals_name_the_step_and_quote_the_server(smtp: tuple[SmtpServer, ssl.SSLContext]) -> None:
    server, trusted = smtp
    wrong = SmtpSettings(
        "localhost", server.ports["starttls"], "ladder@x.org", user=USER, password="wrong pw", context=trusted
    )
    with pytest.raises(SmtpError) as refused:
        await send_mail(wrong, _message("nobody@example.org"), ["nobody@example.org"])
    assert refused.value.step == "AUTH PLAIN" and refused.value.permanent
    assert "refused: 535" in str(refused.value) and "wrong pw" not in str(refused.value)

    plain = SmtpSettings("127.0.0.1", server.ports["plain"], "ladder@localhost", tls="none")
    with pytest.raises(SmtpError) as refused:
        await send_mail(plain, _message("refuse@example.org"), ["refuse@example.org"])
    assert str(refused.value) == (
        f"SMTP server 127.0.0.1:{server.ports['plain']}: RCPT TO <refuse@example.org>: "
        "refused: 550 5.1.1 no mailbox here by that name"
    )
    assert refused.value.permanent

    no_starttls = SmtpSettings("127.0.0.1", server.ports["plain"], "ladder@localhost")
    with pytest.raises(SmtpError, match="STARTTLS: the server does not offer STARTTLS: give --smtp-tls tls"):
        await send_mail(no_starttls, _message("x@example.org"), ["x@example.org"])

    untrusted = SmtpSettings("localhost", server.ports["tls"], "ladder@localhost", tls="tls")
    with pytest.raises(SmtpError, match=r"TLS: the TLS handshake failed .*CERTIFICATE_VERIFY_FAILED"):
        await send_mail(untrusted, _message("x@example.org"), ["x@example.org"])


async def test_nobody_listening_is_a_connect_error(free_port: int) -> None:
    settings = SmtpSettings("127.0.0.1", free_port, "ladder@localhost", tls="none")
    with pytest.raises(SmtpError, match=f"127.0.0.1:{free_port}: connect: cannot connect") as refused:
        await send_mail(settings, _message("x@example.org"), ["x@example.org"])
    assert not refused.value.permanent  # tried again later


def test_plain_smtp_only_to_this_machine() -> None:
    check_settings(SmtpSettings("localhost", 25, "a@b.c", tls="none"))
    with pytest.raises(ValueError, match=r"only to a relay on this machine .* not mail\.example\.org"):
        check_settings(SmtpSettings("mail.example.org", 25, "a@b.c", tls="none"))
    with pytest.raises(ValueError, match="--smtp-user and --smtp-password-file together"):
        check_settings(SmtpSettings("mail.example.org", 587, "a@b.c", user="me"))


def test_dot_stuffing_and_the_end_of_data() -> None:
    data = message_bytes(_message("a@b.c", ".x\n..y\nz.\n"))
    assert b"\r\n..x\r\n...y\r\nz.\r\n" in data and data.endswith(b"\r\n.\r\n")
    assert b"\n" not in data.replace(b"\r\n", b"")


async def test_multi_line_replies_and_a_silent_server_in_virtual_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client, server = trio.testing.memory_stream_pair()
    talk = _Conversation(SmtpSettings("mx", 25, "a@b.c", step_timeout=30), client)
    await server.send_all(b"250-mx greets you\r\n250-STARTTLS\r\n250 AUTH PLAIN LOGIN\r\n")
    assert await talk.ehlo() == {"STARTTLS": "", "AUTH": "PLAIN LOGIN"}
    await server.send_all(b"nonsense\r\n")
    with pytest.raises(SmtpError, match="MAIL FROM: not an SMTP reply"):
        await talk.step("MAIL FROM", b"MAIL FROM:<a@b.c>", 250)
    start = trio.current_time()
    with pytest.raises(SmtpError, match="DATA: no answer within 30 s"):
        await talk.step("DATA", b"DATA", 354)  # the server never answers
    assert trio.current_time() - start == pytest.approx(30)
