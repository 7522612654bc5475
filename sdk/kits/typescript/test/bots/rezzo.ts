// A Rezzo test bot: walks while the way is blank, breaks its own flags, turns otherwise.
import { main, rezzo } from "../../src/index.js";
import { Reporting } from "./report.js";

class Walker extends Reporting implements rezzo.RezzoBot {
  onTick(view: rezzo.View): rezzo.Answer {
    this.firstView({ tick: view.tick, agents: view.agents, viewports: view.viewports.length, ahead: view.viewports[0]?.ahead() });
    return view.viewports.map((vp, i) => {
      const ahead = vp.ahead();
      if (rezzo.kind(ahead) === rezzo.Cell.FLAG && rezzo.owner(ahead) === 0) return rezzo.Move.HIT;
      if (vp.canAdvance()) return (view.tick + i) % 5 === 0 ? rezzo.Move.BUILD : rezzo.Move.ADVANCE;
      return (view.tick + i) % 2 ? rezzo.Move.LEFT : rezzo.Move.RIGHT;
    });
  }
}

main(rezzo.game, () => new Walker(), { name: "ts_rezzo" });
