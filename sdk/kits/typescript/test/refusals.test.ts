// Ladder mode's retry rule: refusals in RETRY_LATER and lost connections are tried again after a back-off,
// anything else stops the bot. A scripted server refuses on cue; a real ladder refuses a wrong token.

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import { test } from "node:test";

import { encode } from "@msgpack/msgpack";

import { FrameReader } from "../src/index.js";
import { BOTS, CELLARENA, cleanEnv, runCommand, startServer, tempDir } from "./helpers.js";

const BOT = ["node", path.join(BOTS, "rezzo.js")];

function send(sock: net.Socket, message: object): void {
  const body = encode(message);
  const header = Buffer.alloc(4);
  header.writeUInt32BE(body.byteLength);
  sock.end(Buffer.concat([header, body]));
}

/** A server that answers each connection's hello with the next refusal of `script`, noting when each came. */
function refusingServer(script: Array<[string, string]>): Promise<{ port: number; times: number[]; hellos: Array<Record<string, unknown>>; close: () => void }> {
  const times: number[] = [];
  const hellos: Array<Record<string, unknown>> = [];
  const server = net.createServer((sock) => {
    const reader = new FrameReader();
    sock.on("data", (chunk) => {
      for (const message of reader.feed(chunk)) {
        times.push(performance.now());
        hellos.push(message);
        const [code, text] = script[Math.min(hellos.length - 1, script.length - 1)];
        send(sock, { type: "error", code, message: text });
      }
    });
    sock.on("error", () => undefined);
  });
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as net.AddressInfo).port;
      resolve({ port, times, hellos, close: () => server.close() });
    });
  });
}

test("a ladder bot comes back after 'not now' refusals, waiting longer each time, and stops at bad_hello", async () => {
  const server = await refusingServer([
    ["queue_full", "the queue is full"],
    ["locked_out", "too many wrong tokens; refused for another 0.4 s"],
    ["shutdown", "the ladder is stopping"],
    ["bad_hello", "unknown token"],
  ]);
  try {
    // The back-off's rounds shortened to 25-50 ms, 50-100 ms, 100-200 ms: the lock-out's 0.4 s stand out.
    const quick = cleanEnv({ CELLARENA_BACKOFF_FIRST_S: "0.05" });
    const done = await runCommand([...BOT, "--port", String(server.port), "--ladder", "--token", "t0k"], quick);
    assert.equal(done.code, 1, done.stderr);
    assert.equal(server.hellos.length, 4);
    assert.ok(server.hellos.every((h) => h.token === "t0k" && h.game === "rezzo"));
    const gaps = server.times.slice(1).map((t, i) => (t - server.times[i]) / 1000);
    assert.ok(gaps[0] >= 0.025, `first wait ${gaps[0]}`);
    assert.ok(gaps[1] >= 0.4, `the lock-out's 0.4 s were not waited: ${gaps[1]}`);
    assert.ok(gaps[2] >= 0.1, `third wait ${gaps[2]}`);
    assert.match(done.stderr, /error 'bad_hello'.*check the bot's token.*not trying again/);
    assert.match(done.stderr, /'queue_full'.*trying again in/);
  } finally {
    server.close();
  }
});

test("one match: a refusal that means 'not now' still ends the run, since the host that started the bot wants to know", async () => {
  const server = await refusingServer([["busy", "already queued"]]);
  try {
    const done = await runCommand([...BOT, "--port", String(server.port)]);
    assert.equal(done.code, 1);
    assert.equal(server.hellos.length, 1);
    assert.match(done.stderr, /'busy': already queued/);
  } finally {
    server.close();
  }
});

test("a real ladder refuses a wrong token with bad_hello, and the bot stops instead of retrying", async () => {
  const folder = tempDir("ladder");
  const added = await runCommand([...CELLARENA, "ladder", "--dir", folder, "bot", "add", "alice", "--game", "rezzo"]);
  assert.equal(added.code, 0, added.stderr);
  const ladder = await startServer(["ladder", "--dir", folder, "serve", "rezzo", "--port", "0", "--grace", "0"]);
  try {
    const tokenFile = path.join(folder, "wrong.token");
    fs.writeFileSync(tokenFile, "cla_not_a_token\n");
    const done = await runCommand([...BOT, "--port", String(ladder.port), "--ladder", "--token-file", tokenFile]);
    assert.equal(done.code, 1, done.stderr);
    assert.match(done.stderr, /bad_hello/);
    assert.ok(!done.stderr.includes("cla_not_a_token"), "the token must not be logged");
  } finally {
    await ladder.stop();
  }
});

test("a ladder's redirect is followed: the match is played at the address given, with the token given", async () => {
  const host = await startServer(["serve", "rezzo", "--port", "0", "--max-ticks", "30", "--tick-rate", "30", "--budget-ms", "25"]);
  const hellos: Array<Record<string, unknown>> = [];
  const ladder = net.createServer((sock) => {
    const reader = new FrameReader();
    sock.on("data", (chunk) => {
      for (const message of reader.feed(chunk)) {
        hellos.push(message);
        send(sock, { type: "redirect", host: "127.0.0.1", port: host.port, token: "match-token", tls: false });
      }
    });
    sock.on("error", () => undefined);
  });
  await new Promise<void>((resolve) => ladder.listen(0, "127.0.0.1", resolve));
  try {
    const port = (ladder.address() as net.AddressInfo).port;
    const [sent, direct] = await Promise.all([
      runCommand([...BOT, "--port", String(port), "--name", "sent", "--token", "ladder-token"]),
      runCommand([...BOT, "--port", String(host.port), "--name", "direct"]),
    ]);
    assert.equal(sent.code, 0, sent.stderr);
    assert.equal(direct.code, 0, direct.stderr);
    assert.match(sent.stderr, new RegExp(`playing this match at 127\\.0\\.0\\.1:${host.port}`));
    assert.match(sent.stderr, /REPORT end/);
    assert.deepEqual(hellos.map((h) => [h.token, h.accepts]), [["ladder-token", ["redirect"]]]);
  } finally {
    ladder.close();
    await host.stop();
  }
});
