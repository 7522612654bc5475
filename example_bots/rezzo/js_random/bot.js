#!/usr/bin/env node
// js_random: a minimal cellarena bot for Rezzo, written from docs/protocol.md and docs/games/rezzo.md
// alone. It shows everything a client in any language has to do:
//
//   1. connect over TCP and send `hello` at once;
//   2. read frames: a 4-byte big-endian length, then that many bytes holding one msgpack map;
//   3. answer every `tick` with one `moves` message holding one move code per listed agent;
//   4. stop on `end` (exit 0); log an `error` to stderr (exit 2).
//
// Settings, flags first, then environment, then defaults:
//   --host / CELLARENA_HOST    server address          (127.0.0.1)
//   --port / CELLARENA_PORT    server port             (7777)
//   --name / CELLARENA_NAME    bot name, 1-64 chars    (js_random)
//   --token / CELLARENA_TOKEN_FD (a pipe to read it from) / CELLARENA_TOKEN  seat token  (none)
//   --seed / CELLARENA_SEED    random seed, an integer (0)
//
// Exit codes: 0 after `end`; 1 connection trouble (refused, reset, closed before `end`);
// 2 the server sent an `error`; 3 the server sent something this bot cannot read; 64 bad usage.
"use strict";

const fs = require("node:fs");
const net = require("node:net");
const { encode, decode } = require("@msgpack/msgpack");

const PROTOCOL_VERSION = 1;
const GAME = "rezzo";
const MAX_CLIENT_FRAME = 65536; // body bytes we may send
const MAX_SERVER_FRAME = 67108864; // body bytes the server may send

// Rezzo's public numbers (docs/games/rezzo.md).
const MOVE = { NOOP: 0, ADVANCE: 1, LEFT: 2, RIGHT: 3, BUILD: 4, HIT: 5 };
const BLANK = 0;
const CONDUCTOR = 1;
const ELECTRON = 2;
const TAIL = 3;
const FLAG_KIND = 16;

const EXIT = { OK: 0, CONNECTION: 1, SERVER_ERROR: 2, PROTOCOL: 3, USAGE: 64 };

// ------------------------------------------------------------------ settings
function parseArgs(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const m = /^--(host|port|name|token|seed)(?:=(.*))?$/.exec(arg);
    if (m) {
      let value = m[2];
      if (value === undefined) {
        if (i + 1 >= argv.length) usage(`${arg} needs a value`);
        value = argv[++i];
      }
      out[m[1]] = value;
    } else if (arg === "-h" || arg === "--help") {
      process.stdout.write(
        "usage: node bot.js [--host H] [--port P] [--name N] [--token T] [--seed S]\n" +
          "defaults come from CELLARENA_HOST, CELLARENA_PORT, CELLARENA_NAME, CELLARENA_TOKEN, CELLARENA_SEED\n",
      );
      process.exit(EXIT.OK);
    } else {
      usage(`unknown argument ${JSON.stringify(arg)}`);
    }
  }
  return out;
}

function usage(message) {
  process.stderr.write(`js_random: ${message}\n`);
  process.exit(EXIT.USAGE);
}

// The seat token: `cellarena match` hands it over through an inherited pipe (its descriptor number in
// CELLARENA_TOKEN_FD), read once and closed, so other processes cannot find it in our environment.
function seatToken(env) {
  const fd = Number(env.CELLARENA_TOKEN_FD);
  if (env.CELLARENA_TOKEN_FD && Number.isInteger(fd) && fd >= 0) {
    try {
      const text = fs.readFileSync(fd, "utf8");
      fs.closeSync(fd);
      const line = text.split("\n")[0].trim();
      if (line) return line;
    } catch (err) {
      process.stderr.write(`js_random: cannot read the token from fd ${fd}: ${err.message}\n`);
    }
  }
  return env.CELLARENA_TOKEN || undefined;
}

function settings() {
  const args = parseArgs(process.argv.slice(2));
  const env = process.env;
  const pick = (key, envKey, fallback) =>
    args[key] !== undefined ? args[key] : env[envKey] !== undefined && env[envKey] !== "" ? env[envKey] : fallback;
  const host = pick("host", "CELLARENA_HOST", "127.0.0.1");
  const portText = pick("port", "CELLARENA_PORT", "7777");
  const port = Number(portText);
  if (!Number.isInteger(port) || port < 1 || port > 65535) usage(`bad port ${JSON.stringify(portText)}`);
  const name = pick("name", "CELLARENA_NAME", "js_random");
  const nameLength = [...name].length;
  if (nameLength < 1 || nameLength > 64) usage("the name must be 1 to 64 characters");
  const token = args.token !== undefined ? args.token : seatToken(env);
  const seedText = pick("seed", "CELLARENA_SEED", "0");
  const seed = Number(seedText);
  if (!Number.isInteger(seed)) usage(`bad seed ${JSON.stringify(seedText)}`);
  return { host, port, name, token, seed };
}

// ------------------------------------------------------------------ deterministic randomness
// mulberry32: a tiny seeded PRNG, so a given seed and the same viewports give the same moves.
function makeRng(seed) {
  let a = seed >>> 0;
  return function next() {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// ------------------------------------------------------------------ strategy
// One move for one agent, from its viewport plane (row-major, row 0 farthest ahead, the agent at
// the bottom centre). Mostly walk on when the way ahead is blank, sometimes lay wire while doing so,
// chip away at our own flags (a flag of ours next to a base makes us lose), turn otherwise.
function chooseMove(cells, offset, viewSize, rng) {
  const front = cells[offset + (viewSize - 2) * viewSize + Math.floor(viewSize / 2)];
  const r = rng();
  if (front === BLANK) {
    if (r < 0.72) return MOVE.ADVANCE;
    if (r < 0.84) return MOVE.BUILD;
    return r < 0.92 ? MOVE.LEFT : MOVE.RIGHT;
  }
  if (front === FLAG_KIND + 0) return MOVE.HIT; // our own flag: owner 0 is always us
  if ((front === CONDUCTOR || front === ELECTRON || front === TAIL) && r < 0.25) return MOVE.HIT;
  return rng() < 0.5 ? MOVE.LEFT : MOVE.RIGHT;
}

// ------------------------------------------------------------------ framing
function frame(message) {
  const body = encode(message);
  if (body.length > MAX_CLIENT_FRAME) throw new Error(`outgoing frame of ${body.length} bytes is too large`);
  const header = Buffer.alloc(4);
  header.writeUInt32BE(body.length, 0);
  return Buffer.concat([header, Buffer.from(body.buffer, body.byteOffset, body.byteLength)]);
}

// Reassembles frames from TCP chunks of any size: a frame may span many chunks, and one chunk may
// hold several frames.
class FrameReader {
  constructor(limit) {
    this.limit = limit;
    this.chunks = [];
    this.size = 0;
  }

  feed(chunk) {
    this.chunks.push(chunk);
    this.size += chunk.length;
    const out = [];
    for (;;) {
      if (this.size < 4) break;
      const buf = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks, this.size);
      this.chunks = [buf];
      const length = buf.readUInt32BE(0);
      if (length > this.limit) throw new ProtocolFault(`frame of ${length} bytes is over the limit of ${this.limit}`);
      if (this.size < 4 + length) break;
      const body = buf.subarray(4, 4 + length);
      const rest = buf.subarray(4 + length);
      this.chunks = rest.length ? [rest] : [];
      this.size = rest.length;
      let message;
      try {
        message = decode(body);
      } catch (err) {
        throw new ProtocolFault(`frame body is not one msgpack value (${err.message})`);
      }
      if (message === null || typeof message !== "object" || Array.isArray(message) || message instanceof Uint8Array) {
        throw new ProtocolFault("frame body is not a msgpack map");
      }
      if (typeof message.type !== "string") throw new ProtocolFault("message without a string 'type'");
      out.push(message);
    }
    return out;
  }
}

class ProtocolFault extends Error {}

// ------------------------------------------------------------------ the client
function main() {
  const cfg = settings();
  const rng = makeRng(cfg.seed);
  const reader = new FrameReader(MAX_SERVER_FRAME);
  let viewSize = 13;
  let seat = null;
  let done = false; // set once we know how this run ends

  const log = (text) => process.stderr.write(`js_random: ${text}\n`);

  function finish(code, text) {
    if (done) return;
    done = true;
    if (text) log(text);
    process.exitCode = code;
    sock.destroy();
  }

  function send(message) {
    sock.write(frame(message));
  }

  function onTick(msg) {
    const agents = Array.isArray(msg.agents) ? msg.agents : [];
    const cells = msg.cells instanceof Uint8Array ? msg.cells : new Uint8Array(0);
    let plane = viewSize * viewSize;
    if (agents.length && cells.length !== agents.length * plane && cells.length % agents.length === 0) {
      // Trust the data over the announced view size.
      plane = cells.length / agents.length;
      viewSize = Math.round(Math.sqrt(plane));
    }
    const moves = agents.map((_, i) =>
      (i + 1) * plane <= cells.length ? chooseMove(cells, i * plane, viewSize, rng) : MOVE.NOOP,
    );
    send({ type: "moves", tick: msg.tick, moves });
  }

  function onMessage(msg) {
    switch (msg.type) {
      case "welcome": {
        seat = msg.seat;
        const config = msg.config || {};
        if (Number.isInteger(config.view_size) && config.view_size > 1) viewSize = config.view_size;
        const names = Array.isArray(msg.names) ? msg.names.join(", ") : "?";
        log(`welcome: match ${msg.match}, game ${msg.game}, seat ${seat} of ${msg.players} (${names})`);
        break;
      }
      case "tick":
        onTick(msg);
        break;
      case "end":
        finish(
          EXIT.OK,
          `end after ${msg.ticks} ticks: ${msg.result}, rank ${msg.rank} (${msg.reason}); ` +
            `late ${msg.late}, invalid ${msg.invalid}, illegal ${msg.illegal}`,
        );
        break;
      case "error":
        finish(EXIT.SERVER_ERROR, `server error ${msg.code}: ${msg.message}`);
        break;
      default:
        // The protocol calls unknown types errors; a bot cannot report them, so it says so and goes on.
        log(`ignoring a message of unknown type ${JSON.stringify(msg.type)}`);
    }
  }

  const sock = net.connect({ host: cfg.host, port: cfg.port });
  sock.setNoDelay(true); // moves are tiny and urgent: no Nagle delay

  sock.on("connect", () => {
    const hello = { type: "hello", protocol: PROTOCOL_VERSION, name: cfg.name, game: GAME, role: "bot" };
    if (cfg.token !== undefined) hello.token = cfg.token;
    send(hello);
  });

  sock.on("data", (chunk) => {
    if (done) return;
    let messages;
    try {
      messages = reader.feed(chunk);
    } catch (err) {
      finish(EXIT.PROTOCOL, `cannot read the server: ${err.message}`);
      return;
    }
    for (const msg of messages) {
      onMessage(msg);
      if (done) return;
    }
  });

  sock.on("error", (err) => finish(EXIT.CONNECTION, `connection to ${cfg.host}:${cfg.port} failed: ${err.message}`));
  sock.on("close", () => finish(EXIT.CONNECTION, "the server closed the connection before the match ended"));
}

main();
