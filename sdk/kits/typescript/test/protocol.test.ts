// Frames, messages and the back-off, without a server.

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { test } from "node:test";

import { encode } from "@msgpack/msgpack";

import { Backoff, encodeFrame, FrameReader, hello, MAX_CLIENT_FRAME, ProtocolError, RETRY_LATER, rezzo, seatToken } from "../src/index.js";
import { tempDir } from "./helpers.js";

function frame(value: unknown): Buffer {
  const body = encode(value);
  const header = Buffer.alloc(4);
  header.writeUInt32BE(body.byteLength);
  return Buffer.concat([header, body]);
}

test("frames are reassembled from chunks of any size, several to a chunk", () => {
  const stream = Buffer.concat([frame({ type: "tick", tick: 1 }), frame({ type: "tick", tick: 2 }), frame({ type: "end" })]);
  for (const size of [1, 3, 7, stream.length]) {
    const reader = new FrameReader();
    const got: unknown[] = [];
    for (let i = 0; i < stream.length; i += size) got.push(...reader.feed(stream.subarray(i, i + size)));
    assert.deepEqual(got, [{ type: "tick", tick: 1 }, { type: "tick", tick: 2 }, { type: "end" }]);
  }
});

test("a frame over the limit is refused from its length alone, a body that is no map as bad_frame", () => {
  const reader = new FrameReader(100);
  const header = Buffer.alloc(4);
  header.writeUInt32BE(101);
  assert.throws(() => reader.feed(header), (e: ProtocolError) => e.code === "too_large");
  assert.throws(() => new FrameReader().feed(frame([1, 2])), (e: ProtocolError) => e.code === "bad_frame");
  assert.throws(() => new FrameReader().feed(frame({ tick: 1 })), (e: ProtocolError) => e.code === "bad_message");
});

test("a client frame over 65,536 bytes is not sent", () => {
  assert.throws(() => encodeFrame({ type: "moves", tick: 1, moves: "x".repeat(MAX_CLIENT_FRAME) }), /65536 bytes at most/);
  const ok = encodeFrame(hello("me", "rezzo", "t0k"));
  assert.equal(ok.readUInt32BE(0), ok.length - 4);
  assert.deepEqual(new FrameReader().feed(ok), [
    { type: "hello", protocol: 1, name: "me", game: "rezzo", role: "bot", token: "t0k", accepts: ["redirect"] },
  ]);
});

test("the back-off doubles with jitter up to 60 s, honours a lock-out's time, and starts again", () => {
  let r = 0;
  const backoff = new Backoff(1, 60, () => r);
  const lows = [1, 2, 3, 4, 5, 6, 7, 8].map(() => backoff.next());
  assert.deepEqual(lows, [0.5, 1, 2, 4, 8, 16, 30, 30]);
  r = 0.999;
  assert.ok(backoff.next() > 59.9);
  assert.ok(backoff.next("refused for another 90 s") >= 90);
  backoff.reset();
  r = 0;
  assert.equal(backoff.next(), 0.5);
  assert.deepEqual([...RETRY_LATER].sort(), ["busy", "locked_out", "queue_full", "shutdown", "too_many_connections"]);
});

test("the seat token is read once from the descriptor CELLARENA_TOKEN_FD names, which is then closed", () => {
  const file = path.join(tempDir("token"), "token");
  fs.writeFileSync(file, "0123456789abcdef0123456789abcdef\n");
  const fd = fs.openSync(file, "r");
  assert.equal(seatToken({ CELLARENA_TOKEN_FD: String(fd) }), "0123456789abcdef0123456789abcdef");
  assert.throws(() => fs.fstatSync(fd), /EBADF/);
  assert.equal(seatToken({ CELLARENA_TOKEN: "mine" }), "mine");
  assert.equal(seatToken({}), undefined);
});

test("a Rezzo view addresses cells relative to the agent", () => {
  const cells = new Uint8Array(rezzo.VIEW_CELLS);
  cells[11 * 13 + 6] = rezzo.Cell.FLAG + 0; // one ahead: our own flag
  cells[10 * 13 + 5] = rezzo.Cell.GEYSER + 1; // two ahead, one left: theirs
  const view = rezzo.game.makeView({ type: "tick", tick: 4, budget_ms: 60, agents: [2], cells, damage: new Uint8Array(169) });
  const vp = view.viewports[0];
  assert.equal(rezzo.kind(vp.ahead()), rezzo.Cell.FLAG);
  assert.equal(rezzo.owner(vp.ahead()), 0);
  assert.deepEqual(vp.find(rezzo.Cell.GEYSER, false), [[2, -1]]);
  assert.ok(!vp.canAdvance() && vp.canHit());
  assert.deepEqual(rezzo.game.encodeAnswer(rezzo.Move.HIT, { agents: [2] }), [5]);
  assert.throws(() => rezzo.game.encodeAnswer([9], { agents: [2] }), /no move code/);
  assert.throws(() => rezzo.game.makeView({ type: "tick", tick: 4, budget_ms: 60, agents: [2], cells: new Uint8Array(3), damage: new Uint8Array(3) }), /must hold 169 bytes/);
});
