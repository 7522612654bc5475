// A Cloth of Gold test bot: one unit on an empty cell of its territory (anywhere empty for the first).
import { cloth, main } from "../../src/index.js";
import { Reporting } from "./report.js";

class Placer extends Reporting implements cloth.ClothBot {
  onTick(view: cloth.View): cloth.Answer {
    this.firstView(view);
    for (let y = 0; y < view.height; y++) {
      for (let x = 0; x < view.width; x++) {
        const free = cloth.at(view.cells, view, x, y) === cloth.Cell.EMPTY;
        if (free && (view.first || cloth.inTerritory(view, x, y))) return [[x, y]];
      }
    }
    return [];
  }
}

main(cloth.game, () => new Placer(), { name: "ts_cloth" });
