// The loop's promises, in-process against a scripted server: a bot that throws or answers nonsense
// costs that tick (sent without `moves`, which the server counts invalid), never the match; a tick
// that fell behind is skipped for the newest; settings come from flags, then the environment.

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import { test } from "node:test";

import { encode } from "@msgpack/msgpack";

import { cata, Connection, Debug, type Fields, FrameReader, hello, MAX_MARKS, parseSettings, play, UsageError } from "../src/index.js";
import { tempDir } from "./helpers.js";

function frame(message: object): Buffer {
  const body = encode(message);
  const header = Buffer.alloc(4);
  header.writeUInt32BE(body.byteLength);
  return Buffer.concat([header, body]);
}

const WELCOME = { type: "welcome", protocol: 1, role: "bot", seat: 0, game: "cata", match: 1, players: 2, names: ["me", "them"], tick_rate: 0, budget_ms: 1000, config: { size: 8 } };

function tick(n: number): Fields {
  return {
    type: "tick", tick: n, budget_ms: 1000, seat: 0, size: 8, board: new Uint8Array(8), rule: new Array(32).fill(0).map((_, i) => (i < 16 ? 0 : 1)),
    health: [64, 64], cells_per_hp: 16, turn: 2, move: 0, moves_left: 2, blocked: false, meditated: false,
    opponent_meditated: false, refused: null, last_reaction: null,
  };
}

const END = { type: "end", ticks: 3, result: "draw", rank: 1, ranks: [1, 1], winner: null, reason: "test", late: 0, invalid: 1, illegal: 0 };

/** Serves one connection: `batches` of frames, each sent after an answer to the previous batch. */
function scripted(batches: object[][]): Promise<{ port: number; answers: Fields[] }> {
  const answers: Fields[] = [];
  const server = net.createServer((sock) => {
    const reader = new FrameReader();
    let next = 0;
    sock.on("data", (chunk) => {
      for (const message of reader.feed(chunk)) {
        if (message.type !== "hello") answers.push(message);
        if (next < batches.length) sock.write(Buffer.concat(batches[next++].map(frame)));
        if (next === batches.length) {
          sock.end();
          server.close();
        }
      }
    });
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({ port: (server.address() as net.AddressInfo).port, answers })));
}

test("a bot that throws or answers nonsense loses that tick, not the match", async () => {
  const server = await scripted([[WELCOME, tick(0)], [tick(1)], [tick(2)], [END]]);
  const conn = await Connection.open("127.0.0.1", server.port);
  conn.send(hello("me", "cata"));
  const said: string[] = [];
  let calls = 0;
  const bot: cata.CataBot = {
    onTick(view) {
      calls += 1;
      if (view.tick === 0) throw new Error("boom");
      if (view.tick === 1) return [9, 0] as unknown as cata.Answer;
      return cata.legalMoves(view)[0];
    },
  };
  const result = await play(cata.game, bot, conn, (t) => said.push(t), true);
  assert.equal(calls, 3);
  assert.equal(result.reason, "test");
  assert.deepEqual(server.answers.map((a) => a.tick), [0, 1, 2]);
  assert.ok(!("moves" in server.answers[0]) && !("moves" in server.answers[1]));
  assert.deepEqual(server.answers[2].moves, [cata.Action.STRIKE, 16]);
  assert.match(said.join("\n"), /tick 0: onTick threw\nError: boom/);
  assert.match(said.join("\n"), /tick 1: 9 is no move code/);
});

test("what onTick draws rides with its answer, within the caps; a bad drawing never costs the move", async () => {
  const server = await scripted([[WELCOME, tick(0)], [tick(1)], [tick(2)], [END]]);
  const conn = await Connection.open("127.0.0.1", server.port);
  conn.send(hello("me", "cata"));
  const said: string[] = [];
  const bot: cata.CataBot = {
    onTick(view, debug) {
      if (view.tick === 0) {
        debug.mark([3, 4], "yellow", "a label longer than sixteen");
        debug.line([0, 0], [7, 7], "#00FF00");
        debug.log("thinking\nhard");
      }
      if (view.tick === 1) {
        for (let i = 0; i < MAX_MARKS + 5; i++) debug.mark([i, 0], "red");
        debug.mark([1.5, 2], "red"); // no cell: dropped and counted, the move still goes
        debug.log("x".repeat(2000)); // past the text cap: dropped
      }
      return cata.legalMoves(view)[0];
    },
  };
  await play(cata.game, bot, conn, (t) => said.push(t), true);
  const [first, second, third] = server.answers;
  assert.deepEqual(first.debug, {
    marks: [{ cell: [3, 4], colour: "#ffe119", label: "a label longer t" }],
    lines: [{ from: [0, 0], to: [7, 7], colour: "#00ff00" }],
    text: ["thinking", "hard"],
  });
  const kept = second.debug as { marks: unknown[]; text?: unknown };
  assert.equal(kept.marks.length, MAX_MARKS);
  assert.ok(!("text" in kept));
  assert.ok(!("debug" in third)); // nothing drawn: no field, as from a bot that never draws
  assert.ok([first, second, third].every((a) => Array.isArray(a.moves)));
  assert.match(said.join("\n"), /debug drawing dropped: more than 256 marks in one tick/);
  const alone = new Debug();
  alone.mark([1, 1], "no such colour");
  alone.mark([1, 1], "red", "tab\there");
  assert.equal(alone.take(), undefined);
  assert.equal(alone.dropped, 2);
});

test("ticks that queued up while the bot was busy are skipped for the newest", async () => {
  const server = await scripted([[WELCOME, tick(0), tick(1), tick(2)], [END]]);
  const conn = await Connection.open("127.0.0.1", server.port);
  conn.send(hello("me", "cata"));
  const said: string[] = [];
  const seen: number[] = [];
  await play(cata.game, { onTick: (v) => (seen.push(v.tick), [cata.Action.PASS, 0]) }, conn, (t) => said.push(t), true);
  assert.deepEqual(seen, [2]);
  assert.match(said.join("\n"), /skipping to the newest tick/);
});

test("flags win over CELLARENA_* variables, which win over defaults; bad ones name themselves", () => {
  const none = (): undefined => undefined;
  const env = { CELLARENA_HOST: "h", CELLARENA_PORT: "8", CELLARENA_NAME: "envname" };
  const s = parseSettings(["--port", "9", "--matches=3"], env, { name: "x" }, none);
  assert.deepEqual([s.host, s.port, s.name, s.matches, s.ladder, s.tls], ["h", 9, "envname", 3, false, undefined]);
  assert.equal(parseSettings([], {}, { name: "x", ladder: true }, none).ladder, true);
  assert.deepEqual(parseSettings(["--tls"], {}, { name: "x" }, none).tls, {});
  const refused = (argv: string[], e: NodeJS.ProcessEnv, words: RegExp): void =>
    assert.throws(() => parseSettings(argv, e, { name: "x" }, none), (err: Error) => err instanceof UsageError && words.test(err.message));
  refused(["--matches", "2", "--ladder"], {}, /give one of them/);
  refused([], { CELLARENA_PORT: "http" }, /CELLARENA_PORT must be a port number/);
  // The back-off's first round, shortened for tests.
  assert.equal(s.backoffFirst, 1);
  assert.equal(parseSettings([], { CELLARENA_BACKOFF_FIRST_S: "0.05" }, { name: "x" }, none).backoffFirst, 0.05);
  refused([], { CELLARENA_BACKOFF_FIRST_S: "0" }, /CELLARENA_BACKOFF_FIRST_S must be seconds/);
  refused(["--port", "70000"], {}, /--port must be a port number/);
  refused(["--name", "x".repeat(65)], {}, /--name must be 1 to 64/);
  refused(["--tls-ca", "/nonexistent.pem"], {}, /--tls-ca \/nonexistent.pem: no such file/);
  refused(["--frobnicate"], {}, /unknown argument/);
  const empty = path.join(tempDir("settings"), "empty.token");
  fs.writeFileSync(empty, "\n");
  refused(["--token-file", empty], {}, /the file is empty/);
  const file = path.join(tempDir("settings"), "alice.token");
  fs.writeFileSync(file, "cla_secret\n");
  assert.equal(parseSettings(["--token-file", file], {}, { name: "x" }, none).token, "cla_secret");
});
