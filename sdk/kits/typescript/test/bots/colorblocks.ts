// A Colorblocks test bot: spawns a fighter every turn.
import { colorblocks, main } from "../../src/index.js";
import { Reporting } from "./report.js";

class Spawner extends Reporting implements colorblocks.ColorblocksBot {
  onTick(view: colorblocks.View): colorblocks.Answer {
    this.firstView(view);
    return [["spawn", "fighter"]];
  }
}

main(colorblocks.game, () => new Spawner(), { name: "ts_colorblocks" });
