// The cellarena TypeScript kit: `run(game, makeBot)` plays, each game's module types its view and answer.
//
//   import { main, rezzo } from "./cellarena/index.js";
//   class Forward implements rezzo.RezzoBot {
//     onTick(view: rezzo.View): rezzo.Answer {
//       return view.viewports.map((vp) => (vp.canAdvance() ? rezzo.Move.ADVANCE : rezzo.Move.RIGHT));
//     }
//   }
//   main(rezzo.game, () => new Forward());

export * from "./backoff.js";
export * from "./bot.js";
export * from "./connection.js";
export * from "./debug.js";
export * from "./game.js";
export * from "./protocol.js";
export * from "./settings.js";
export * as cata from "./games/cata.js";
export * as cloth from "./games/cloth.js";
export * as colorblocks from "./games/colorblocks.js";
export * as drop2df from "./games/drop2df.js";
export * as rezzo from "./games/rezzo.js";

/** Every game this kit plays, by name. */
import { game as cataGame } from "./games/cata.js";
import { game as clothGame } from "./games/cloth.js";
import { game as colorblocksGame } from "./games/colorblocks.js";
import { game as drop2dfGame } from "./games/drop2df.js";
import { game as rezzoGame } from "./games/rezzo.js";
import type { AnyGame } from "./game.js";

export const GAMES: Readonly<Record<string, AnyGame>> = {
  cata: cataGame,
  cloth: clothGame,
  colorblocks: colorblocksGame,
  drop2df: drop2dfGame,
  rezzo: rezzoGame,
};
