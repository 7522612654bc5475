"""`ladder web`'s mail options refused before anything is served, each naming the option at fault and
what to do (issue 42); the SMTP password only from a file only the ladder's user reads. (A private CA
for the SMTP server, `--smtp-ca-file`, is tried against a real server in test_ladder_smtp.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from cellarena_cli import invoke

from cellarena.arena.cli.ladder.mail_options import mail_settings


def _web(folder: Path, *args: str) -> tuple[int, str]:
    return invoke("ladder", "--dir", str(folder), "web", "rezzo", "--port", "0", *args)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--smtp-user", "me"), "--smtp-user needs --smtp-host"),
        (("--verify-email", "--signup", "open"), "--verify-email needs --smtp-host"),
        (("--smtp-host", "mail.example.org"), "--smtp-host mails owners: give --signup too"),
        (
            ("--smtp-host", "mail.example.org", "--smtp-tls", "none", "--signup", "open"),
            "--smtp-tls none sends mail (and any password) in the clear: only to a relay on this machine",
        ),
        (
            ("--smtp-host", "mx.example.org", "--smtp-user", "me", "--signup", "open"),
            "give --smtp-user and --smtp-password-file together",
        ),
        (("--smtp-host", "mx.org", "--mail-from", "not an address", "--signup", "open"), "--mail-from"),
        (("--smtp-ca-file", "ca.pem"), "--smtp-ca-file needs --smtp-host"),
        (
            ("--smtp-host", "mx.example.org", "--signup", "open", "--smtp-ca-file", "/nowhere/ca.pem"),
            "Invalid value for --smtp-ca-file: cannot read CA certificates from /nowhere/ca.pem: No such",
        ),
        (
            (
                "--smtp-host",
                "127.0.0.1",
                "--smtp-tls",
                "none",
                "--signup",
                "open",
                "--smtp-ca-file",
                "ca.pem",
            ),
            "--smtp-ca-file is for the SMTP server's TLS, and --smtp-tls none speaks none",
        ),
    ],
)
def test_mail_options_that_cannot_work_are_refused(tmp_path: Path, args: tuple[str, ...], said: str) -> None:
    code, out = _web(tmp_path, *args)
    assert code == 2 and said in " ".join(out.split()), out


def test_the_password_file_must_be_private(tmp_path: Path) -> None:
    secret = tmp_path / "smtp.password"
    secret.write_text("hunter2 hunter2\nignored\n")
    secret.chmod(0o644)
    code, out = _web(tmp_path, "--signup", "open", "--smtp-host", "mx.example.org", "--smtp-user", "me",
                     "--smtp-password-file", str(secret))  # fmt: skip
    assert code == 2 and f"chmod 600 {secret}" in " ".join(out.split()) and "hunter2" not in out
    secret.chmod(0o600)
    options = {
        "smtp_host": "mx.example.org",
        "smtp_port": None,
        "smtp_tls": "tls",
        "smtp_ca_file": None,
        "smtp_user": "me",
        "smtp_password_file": secret,
        "mail_from": None,
        "verify_email": True,
    }
    settings = mail_settings(options, "open")
    assert (settings.port, settings.sender, settings.password) == (
        465,
        "ladder@mx.example.org",
        "hunter2 hunter2",
    )
    assert "hunter2" not in repr(settings)
