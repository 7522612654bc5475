"""An SDK bot that draws each tick (tests/test_debug_layer.py): a mark on the cell ahead of its first
agent, a line from that agent straight ahead, and the tick in the text panel. It does nothing else."""

from cellarena.sdk import Bot, Move, View, run


class Drawer(Bot):
    def on_tick(self, view: View) -> list[Move]:
        self.debug.mark((11, 6), "red", "ahead")
        self.debug.line((12, 6), (0, 6), "#00ff00")
        self.debug.log(f"tick {view.tick}")
        return [Move.NOOP] * len(view.agents)


if __name__ == "__main__":
    raise SystemExit(run(Drawer))
