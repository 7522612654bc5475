"""A bot whose on_tick raises every tick: the SDK sends each answer without moves (invalid) and the
exception's first line in its debug ``error`` (docs/protocol.md#debug-drawing)."""

from cellarena.sdk import Bot, Move, View, run


class Raiser(Bot):
    def on_tick(self, view: View) -> Move:
        raise ZeroDivisionError(f"no plan for tick {view.tick}")


if __name__ == "__main__":
    raise SystemExit(run(Raiser))
