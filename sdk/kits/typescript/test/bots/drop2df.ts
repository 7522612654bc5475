// A drop2df test bot: edits the first editable cell every third turn, else passes.
import { drop2df, main } from "../../src/index.js";
import { Reporting } from "./report.js";

class Editor extends Reporting implements drop2df.Drop2dfBot {
  onTick(view: drop2df.View): drop2df.Answer {
    this.firstView(view);
    if (view.turn % 3 !== 0) return [];
    const cell = view.row.findIndex((c) => c === drop2df.Cell.EMPTY || c === drop2df.Cell.BLOCK);
    return cell > 0 ? [cell] : null;
  }
}

main(drop2df.game, () => new Editor(), { name: "ts_drop2df" });
