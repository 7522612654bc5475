// A C.A.T.A. test bot: the first legal move, strikes first.
import { cata, main } from "../../src/index.js";
import { Reporting } from "./report.js";

class Striker extends Reporting implements cata.CataBot {
  onTick(view: cata.View): cata.Answer {
    this.firstView({ ...view, topLeft: cata.cell(view, 0, 0) });
    return cata.legalMoves(view)[0] ?? [cata.Action.PASS, 0];
  }
}

main(cata.game, () => new Striker(), { name: "ts_cata" });
