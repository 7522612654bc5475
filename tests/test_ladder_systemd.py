"""`ladder systemd CONFIG` (docs/ladder.md, "Running it as a service"): the units it writes pass
`systemd-analyze verify` and say what the docs say: network-online wanted, TLS from the file, the
database variable (a DSN with a password only in a root-only file), CAP_NET_BIND_SERVICE only for a
port below 1024, the file system read-only but the ladder's folder."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cellarena_cli import ROOT, invoke

CELLARENA = Path(sys.executable).parent / "cellarena"

CONFIG = """\
dir = "{folder}"

[games.rezzo]
host = "0.0.0.0"
port = 443
tls-cert = "fullchain.pem"
tls-key = "privkey.pem"
health-port = 9100

[games.cata]
port = 7778

[web]
port = 8080
signup = "open"

[[house]]
name = "builder"
game = "rezzo"
command = "python example_bots/rezzo/builder.py"
"""


def systemd_analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        why = "systemd-analyze is missing (apt-get install systemd)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why}; .ci/run installs it", pytrace=False)
        pytest.skip(why)
    return found


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The units (and environment file) `ladder systemd` writes for CONFIG on PostgreSQL with a password."""
    base = tmp_path_factory.mktemp("systemd")
    folder = base / "srv ladder"  # a space: the units quote it
    folder.mkdir()
    config = base / "ladder.toml"
    config.write_text(CONFIG.format(folder=folder))
    out = base / "units"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("CELLARENA_LADDER_DB", "postgresql://ladder:pa%24$s@db.example/ladder")
        code, output = invoke(
            "ladder", "systemd", str(config), "--out", str(out), "--cellarena", str(CELLARENA)
        )
    assert code == 0, output
    assert "systemctl daemon-reload && systemctl enable --now cellarena-ladder.target" in output
    assert stat.S_IMODE((out / "ladder.env").stat().st_mode) == 0o600
    return {p.name: p.read_text() for p in out.iterdir()} | {"out": str(out), "folder": str(folder)}


def test_the_units_pass_systemd_analyze_verify(written: dict[str, str]) -> None:
    out = Path(written["out"])
    units = sorted(str(p) for p in out.iterdir() if p.suffix in (".service", ".target"))
    assert [Path(u).name for u in units] == [
        "cellarena-ladder-house.service",
        "cellarena-ladder-serve-cata.service",
        "cellarena-ladder-serve-rezzo.service",
        "cellarena-ladder-web.service",
        "cellarena-ladder.target",
    ]
    done = subprocess.run(
        [systemd_analyze(), "verify", *units], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0 and done.stderr.strip() == "", done.stderr


def test_each_part_runs_the_file_with_network_online_and_hardening(written: dict[str, str]) -> None:
    rezzo = written["cellarena-ladder-serve-rezzo.service"]
    config = str(Path(written["out"]).parent / "ladder.toml")
    assert f"ExecStart={CELLARENA} ladder --config {config} serve rezzo\n" in rezzo
    # The web unit gets the live view of each game as `ladder up` gives it.
    web = f"ExecStart={CELLARENA} ladder --config {config} web --live-port rezzo=auto --live-port cata=auto\n"
    assert web in written["cellarena-ladder-web.service"]
    for name in ("serve-rezzo", "serve-cata", "web"):
        unit = written[f"cellarena-ladder-{name}.service"]
        assert "Wants=network-online.target cellarena-ladder-house.service\n" in unit
        assert "After=network-online.target cellarena-ladder-house.service\n" in unit
        assert "PartOf=cellarena-ladder.target\n" in unit and "User=ladder\n" in unit
        assert "ProtectSystem=strict\n" in unit and "NoNewPrivileges=yes\n" in unit
        assert f'ReadWritePaths="{written["folder"]}"\n' in unit
        assert "PrivateTmp=yes\n" in unit and "Restart=on-failure\n" in unit
    target = written["cellarena-ladder.target"]
    assert "WantedBy=multi-user.target" in target and "Wants=cellarena-ladder-serve-rezzo.service" in target
    house = written["cellarena-ladder-house.service"]
    assert f"ExecStart={CELLARENA} ladder up {config} --check\n" in house and "Type=oneshot" in house


def test_only_a_port_below_1024_gets_its_capability(written: dict[str, str]) -> None:
    assert "AmbientCapabilities=CAP_NET_BIND_SERVICE\n" in written["cellarena-ladder-serve-rezzo.service"]
    assert "AmbientCapabilities" not in written["cellarena-ladder-serve-cata.service"]
    assert "AmbientCapabilities" not in written["cellarena-ladder-web.service"]


def test_a_password_is_never_in_a_unit(written: dict[str, str]) -> None:
    for name, text in written.items():
        if name.endswith((".service", ".target")):
            assert "pa%" not in text and "pa$" not in text, name
    assert "EnvironmentFile=/etc/cellarena/ladder.env\n" in written["cellarena-ladder-web.service"]
    assert 'CELLARENA_LADDER_DB="postgresql://ladder:pa%24\\$s@db.example/ladder"\n' in written["ladder.env"]


def test_a_dsn_without_a_password_is_in_the_unit_and_a_plain_port_off_this_machine_is_warned(
    tmp_path: Path,
) -> None:
    config = tmp_path / "ladder.toml"
    config.write_text('db = "postgresql://ladder@/ladder%2Dx"\n[games.cata]\nhost = "0.0.0.0"\n')
    code, output = invoke(
        "ladder", "systemd", str(config), "--out", str(tmp_path), "--cellarena", str(CELLARENA)
    )
    assert code == 0, output
    unit = (tmp_path / "cellarena-ladder-serve-cata.service").read_text()
    assert "Environment=CELLARENA_LADDER_DB=postgresql://ladder@/ladder%%2Dx\n" in unit  # % kept literal
    assert (
        not (tmp_path / "ladder.env").exists() and not (tmp_path / "cellarena-ladder-house.service").exists()
    )
    assert f"ReadWritePaths={tmp_path / 'ladder'}\n" in unit  # the default folder, the file's folder's
    assert "warning: [games.cata] serves plain TCP on 0.0.0.0" in output and "tls-cert" in output
    code, output = invoke(
        "ladder",
        "systemd",
        str(config),
        "--out",
        str(tmp_path / "j"),
        "--cellarena",
        str(CELLARENA),
        "--json",
    )
    said = json.loads(output)
    assert code == 0 and said["written"] == ["cellarena-ladder-serve-cata.service", "cellarena-ladder.target"]
    assert said["warnings"][0].startswith("[games.cata] serves plain TCP on 0.0.0.0")
    assert said["install"][-1] == "systemctl daemon-reload && systemctl enable --now cellarena-ladder.target"


def test_the_unit_in_the_docs_is_what_ladder_systemd_writes_for_the_docs_example(tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "ladder.md").read_text()
    example = re.search(r"```toml\n(.*?)```", doc[doc.index("## One file to run a ladder") :], re.S)
    shown = re.search(r"```ini\n(.*?)```", doc[doc.index("### Running it as a service") :], re.S)
    assert example is not None and shown is not None
    config = tmp_path / "ladder.toml"
    config.write_text(example.group(1))
    code, output = invoke(
        "ladder", "systemd", str(config), "--out", str(tmp_path / "units"), "--cellarena", str(CELLARENA)
    )
    assert code == 0, output
    unit = (tmp_path / "units" / "cellarena-ladder-serve-rezzo.service").read_text()
    unit = unit.replace(str(config), "/etc/cellarena/ladder.toml").replace(str(tmp_path), "/etc/cellarena")
    assert unit.replace(str(CELLARENA), "/srv/ladder/.venv/bin/cellarena") == shown.group(1)
    units = sorted(str(p) for p in (tmp_path / "units").iterdir())
    done = subprocess.run(
        [systemd_analyze(), "verify", *units], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0 and done.stderr.strip() == "", done.stderr
