// The connection against `cellarena serve`: several matches in a row, TLS with a CA of its own, and the
// errors a bot meets when its TLS settings do not fit the server's.

import assert from "node:assert/strict";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";

import { BOTS, certificates, cleanEnv, runCommand, type Server, startServer, tempDir } from "./helpers.js";

const BOT = ["node", path.join(BOTS, "rezzo.js")];
const PACING = ["--max-ticks", "30", "--tick-rate", "30", "--budget-ms", "25"];

describe("a plain server", () => {
  let server: Server;
  before(async () => {
    server = await startServer(["serve", "rezzo", "--port", "0", ...PACING]);
  });
  after(() => server.stop());

  test("two bots play three matches in a row, each on a new connection", async () => {
    const flags = ["--port", String(server.port), "--matches", "3"];
    const [a, b] = await Promise.all([
      runCommand([...BOT, ...flags, "--name", "a"]),
      runCommand([...BOT, ...flags, "--name", "b"]),
    ]);
    for (const done of [a, b]) {
      assert.equal(done.code, 0, done.stderr);
      assert.equal(done.stderr.match(/REPORT end/g)?.length, 3, done.stderr);
      assert.match(done.stderr, /match 2 of 3 played; connecting for the next/);
    }
  });

  test("a bot told to use TLS on a plain port says so and exits 1", async () => {
    const done = await runCommand([...BOT, "--port", String(server.port), "--tls"]);
    assert.equal(done.code, 1);
    assert.match(done.stderr, /TLS handshake with 127\.0\.0\.1:\d+ failed/);
  });
});

describe("a TLS server", () => {
  let server: Server;
  let pem: { ca: string; cert: string; key: string };
  before(async () => {
    pem = certificates(tempDir("tls"));
    server = await startServer(["serve", "rezzo", "--port", "0", ...PACING, "--tls-cert", pem.cert, "--tls-key", pem.key]);
  });
  after(() => server.stop());

  test("bots that trust its CA play a match over TLS", async () => {
    const flags = ["--port", String(server.port), "--tls-ca", pem.ca];
    const both = await Promise.all([runCommand([...BOT, ...flags, "--name", "a"]), runCommand([...BOT, ...flags, "--name", "b"])]);
    for (const done of both) {
      assert.equal(done.code, 0, done.stderr);
      assert.match(done.stderr, /REPORT end/);
    }
  });

  test("a plain bot is told the server speaks TLS; one that trusts only the system's CAs refuses the certificate", async () => {
    const plain = await runCommand([...BOT, "--port", String(server.port)], cleanEnv());
    assert.equal(plain.code, 1);
    assert.match(plain.stderr, /speaks TLS; connect with --tls|if that port serves TLS, connect with --tls/);
    const system = await runCommand([...BOT, "--port", String(server.port), "--tls"]);
    assert.equal(system.code, 1);
    assert.match(system.stderr, /TLS handshake .* failed: .*certificate/i);
  });
});
