// Every game, played by a test bot on this kit against cellarena's random bot, by `cellarena match`: a
// real server, which hands the bot its seat token through CELLARENA_TOKEN_FD.

import assert from "node:assert/strict";
import * as path from "node:path";
import { test } from "node:test";

import { BOTS, CELLARENA, PYTHON, reports, runCommand, tempDir } from "./helpers.js";

// Each game's view, as the test bot reported its first one: the fields and their JSON types.
const VIEWS: Record<string, Record<string, string>> = {
  rezzo: { tick: "number", agents: "object", viewports: "number", ahead: "number" },
  cata: { seat: "number", size: "number", board: "object", rule: "object", health: "object", turn: "number", movesLeft: "number", blocked: "boolean", topLeft: "number" },
  cloth: { round: "number", you: "number", width: "number", cells: "object", territory: "object", first: "boolean", maxUnits: "number", rejected: "object" },
  drop2df: { turn: "number", turns: "number", row: "object", score: "number", tokens: "object", refused: "object" },
  colorblocks: { seat: "number", turn: "number", board: "object", guards: "object", units: "object", reserves: "object", nextSpawn: "object" },
};
// Short matches, as each game's game.toml has them for a starter's test: every view and answer is read
// all the same, in seconds.
const SHORT: Record<string, string[]> = {
  rezzo: ["--max-ticks", "200"],
  cata: ["--max-turns", "40"],
  cloth: ["--max-rounds", "6"],
  colorblocks: ["--max-turns", "30"],
  drop2df: ["--turns", "15"],
};

for (const game of Object.keys(VIEWS)) {
  test(`${game}: a kit bot plays a whole match against the random bot, every answer read`, async () => {
    const logs = tempDir(game);
    const bot = `ts=node ${path.join(BOTS, `${game}.js`)}`;
    const opponent = `random=${PYTHON} -m cellarena.sdk.opponents ${game}`;
    const done = await runCommand([...CELLARENA, "match", game, "--bot", bot, "--bot", opponent, "--fast", ...SHORT[game], "--log-dir", logs, "--json"]);
    assert.equal(done.code, 0, done.stderr);
    const result = JSON.parse(done.stdout);
    assert.deepEqual(result.forfeits, []);
    assert.equal(result.invalid.ts, 0);
    assert.equal(result.exit_codes.ts, 0);
    const said = reports(path.join(logs, "ts.log"));
    const view = said.view as Record<string, unknown>;
    for (const [field, type] of Object.entries(VIEWS[game])) assert.equal(typeof view[field], type, `${game} view.${field}`);
    const end = said.end as { ticks: number; rank: number };
    assert.equal(end.ticks, result.ticks);
    assert.equal(end.rank, result.ranks.ts);
    assert.equal((said.start as { seat: number }).seat, 0);
  });
}
