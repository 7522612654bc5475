"""``python -m cellarena.arena.cli``: the `cellarena` command, for when its script is not on PATH
(a bot's test runs it with its own interpreter, `sys.executable`, venv activated or not)."""

from cellarena.arena.cli import main

main(prog_name="cellarena")
