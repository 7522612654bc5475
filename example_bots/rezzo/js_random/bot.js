#!/usr/bin/env node
// js_random: a minimal cellarena bot for Rezzo, written from docs/protocol.md and docs/games/rezzo.md
// alone. It shows everything a client in any language has to do:
//
//   1. connect over TCP (or TLS) and send `hello` at once;
//   2. read frames: a 4-byte big-endian length, then that many bytes holding one msgpack map;
//   3. answer every `tick` with one `moves` message holding one move code per listed agent;
//   4. stop on `end`; log an `error` to stderr;
//   5. to keep playing (a ladder), connect again after `end`, and after a refusal that means "not now"
//      or a lost connection, waiting longer after each failure in a row (docs/protocol.md, "Joining a
//      ladder"); a ladder that plays matches elsewhere sends a `redirect`, which the bot follows.
//
// Settings, flags first, then environment, then defaults:
//   --host / CELLARENA_HOST    server address          (127.0.0.1)
//   --port / CELLARENA_PORT    server port             (7777)
//   --name / CELLARENA_NAME    bot name, 1-64 chars    (js_random)
//   --token / CELLARENA_TOKEN_FD (a pipe to read it from) / CELLARENA_TOKEN  seat token  (none)
//   --seed / CELLARENA_SEED    random seed, an integer (0)
//   CELLARENA_SOCKET_FD        a connection already open to the match server, owning this bot's seat
//                              (how `cellarena match` starts it): the first match is played on it
//   --tls                      connect over TLS, checking the certificate against Node's CA store
//   --tls-ca PATH              ... against the CA certificates in this PEM file only (implies --tls)
//   --matches N                play N matches in a row (1)
//   --ladder                   keep playing until stopped (SIGINT, SIGTERM), or --matches N are played
//
// Exit codes: 0 after the last `end` (or stopped by SIGTERM); 1 connection trouble (refused, reset,
// closed before `end`, a TLS handshake refused); 2 the server sent an `error`; 3 the server sent
// something this bot cannot read; 64 bad usage; 130 stopped by SIGINT. With --matches N > 1 or
// --ladder, lost connections and the refusals in RETRY_LATER are tried again instead.
"use strict";

const fs = require("node:fs");
const net = require("node:net");
const tls = require("node:tls");
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

// Connections to a match host tried before a redirected match is given up.
const FOLLOW_ATTEMPTS = 3;
const EXIT = { OK: 0, CONNECTION: 1, SERVER_ERROR: 2, PROTOCOL: 3, USAGE: 64, INTERRUPTED: 130 };

// Refusals that mean "not now": a bot that keeps playing waits and comes back (docs/protocol.md).
const RETRY_LATER = new Set(["shutdown", "busy", "queue_full", "too_many_connections", "locked_out"]);
// What to do about an error that waiting cannot fix, said with it.
const FIX = {
  bad_hello: "check the bot's token (--token or CELLARENA_TOKEN) and its game",
  bad_version: `this bot speaks protocol ${PROTOCOL_VERSION}`,
  tls_required: "connect with --tls",
  revoked: "ask the ladder's host for the bot's current token",
  // Not in RETRY_LATER: a paused (or banned) bot stops until its owner resumes it.
  paused: "fix the bot, then resume it on the ladder (its owner) or ask the ladder's host",
};
// Errors of the network itself, which another try may not meet (any other error before a TLS
// handshake ends is the handshake refused).
const NETWORK_ERRORS = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
]);
const CONNECT_TIMEOUT_MS = 10000;
const BACKOFF_FIRST_S = 1;
const BACKOFF_CAP_S = 60;

// ------------------------------------------------------------------ settings
function parseArgs(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const m = /^--(host|port|name|token|seed|matches|tls-ca)(?:=(.*))?$/.exec(arg);
    if (m) {
      let value = m[2];
      if (value === undefined) {
        if (i + 1 >= argv.length) usage(`${arg} needs a value`);
        value = argv[++i];
      }
      out[m[1]] = value;
    } else if (arg === "--tls" || arg === "--ladder") {
      out[arg.slice(2)] = true;
    } else if (arg === "-h" || arg === "--help") {
      process.stdout.write(
        "usage: node bot.js [--host H] [--port P] [--name N] [--token T] [--seed S]\n" +
          "                   [--tls] [--tls-ca PATH] [--matches N] [--ladder]\n" +
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

// The connection `cellarena match` and tournaments hand over: an open socket to the match server on
// the descriptor CELLARENA_SOCKET_FD names (0, standard input), which already owns this bot's seat, so
// that there is no secret for another process to read. Used for the first match only.
function handedConnection(env) {
  if (!env.CELLARENA_SOCKET_FD) return undefined;
  const fd = Number(env.CELLARENA_SOCKET_FD);
  if (!Number.isInteger(fd) || fd < 0) usage(`CELLARENA_SOCKET_FD must be a descriptor number, got ${JSON.stringify(env.CELLARENA_SOCKET_FD)}`);
  return fd;
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
  // A connection handed over by the program that started this bot already owns its seat: no token.
  const handedFd = handedConnection(env);
  const token = args.token !== undefined ? args.token : handedFd !== undefined ? undefined : seatToken(env);
  const seedText = pick("seed", "CELLARENA_SEED", "0");
  const seed = Number(seedText);
  if (!Number.isInteger(seed)) usage(`bad seed ${JSON.stringify(seedText)}`);
  // --ladder alone plays until stopped; --ladder --matches N is a ladder bot that stops after N.
  const matches = args.matches === undefined && args.ladder ? Infinity : Number(args.matches ?? "1");
  if (matches !== Infinity && (!Number.isInteger(matches) || matches < 1)) {
    usage(`--matches must be 1 or more, got ${JSON.stringify(args.matches)}`);
  }
  let ca;
  if (args["tls-ca"] !== undefined) {
    try {
      ca = fs.readFileSync(args["tls-ca"]);
    } catch (err) {
      usage(`--tls-ca ${args["tls-ca"]}: cannot read it (${err.code || err.message})`);
    }
  }
  const useTls = Boolean(args.tls) || ca !== undefined;
  return { host, port, name, token, seed, matches, ladder: Boolean(args.ladder), tls: useTls, ca, handedFd };
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

// ------------------------------------------------------------------ one connection, one match
// Resolves once with how the connection ended: {kind: "end"}, {kind: "error", code, message} (the
// server's `error` frame), {kind: "connection"} (refused, reset, closed before `end`: worth another
// try), {kind: "tls"} (the handshake was refused: not worth another), or {kind: "protocol"}.
function playOnce(cfg, rng, log, track) {
  return new Promise((resolve) => {
    const reader = new FrameReader(MAX_SERVER_FRAME);
    const address = `${cfg.host}:${cfg.port}`;
    let viewSize = 13;
    let ready = false; // connected (and, over TLS, the handshake done)
    let heard = false; // any byte from the server yet
    let done = false;
    let sock;

    function finish(outcome) {
      if (done) return;
      done = true;
      track(null);
      sock.destroy();
      resolve(outcome);
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
      // The optional `debug` map (docs/protocol.md#debug-drawing): drawn by the web player over the
      // board, kept in the replay, never judged with the moves. Here: the cell ahead of the first
      // agent ([row, col] of its viewport; the agent is at row viewSize - 1, the middle column).
      const debug = { text: [`${agents.length} agents, moves ${moves.join(" ")}`] };
      if (agents.length) {
        const ahead = [viewSize - 2, (viewSize - 1) >> 1];
        debug.marks = [{ cell: ahead, colour: "#ffe119", label: "ahead", agent: agents[0] }];
      }
      send({ type: "moves", tick: msg.tick, moves, debug });
    }

    function onMessage(msg) {
      switch (msg.type) {
        case "welcome": {
          const config = msg.config || {};
          if (Number.isInteger(config.view_size) && config.view_size > 1) viewSize = config.view_size;
          const names = Array.isArray(msg.names) ? msg.names.join(", ") : "?";
          log(`welcome: match ${msg.match}, game ${msg.game}, seat ${msg.seat} of ${msg.players} (${names})`);
          break;
        }
        case "tick":
          onTick(msg);
          break;
        case "end":
          log(
            `end after ${msg.ticks} ticks: ${msg.result}, rank ${msg.rank} (${msg.reason}); ` +
              `late ${msg.late}, invalid ${msg.invalid}, illegal ${msg.illegal}`,
          );
          finish({ kind: "end" });
          break;
        case "redirect": {
          // A ladder playing this match elsewhere: go there with the seat token it gives.
          const ok =
            typeof msg.host === "string" && msg.host.length > 0 && Number.isInteger(msg.port) &&
            msg.port > 0 && msg.port < 65536 && typeof msg.token === "string" && typeof msg.tls === "boolean";
          if (!ok) {
            finish({ kind: "protocol", text: "the server sent a malformed redirect" });
          } else {
            finish({ kind: "redirect", target: { host: msg.host, port: msg.port, token: msg.token, tls: msg.tls } });
          }
          break;
        }
        case "error":
          finish({
            kind: "error",
            code: String(msg.code),
            message: String(msg.message),
            text: `server error ${msg.code}: ${msg.message}`,
          });
          break;
        default:
          // The protocol calls unknown types errors; a bot cannot report them, so it says so and goes on.
          log(`ignoring a message of unknown type ${JSON.stringify(msg.type)}`);
      }
    }

    function onReady() {
      ready = true;
      sock.setTimeout(0); // from now on a bot may wait any time for its match
      const hello = { type: "hello", protocol: PROTOCOL_VERSION, name: cfg.name, game: GAME, role: "bot" };
      if (cfg.token !== undefined) hello.token = cfg.token;
      hello.accepts = ["redirect"]; // this bot follows a ladder's redirect (playRedirected)
      send(hello);
    }

    if (cfg.handedFd !== undefined) {
      // Connected already: say hello once the handlers below are in place.
      sock = new net.Socket({ fd: cfg.handedFd, readable: true, writable: true });
      cfg.handedFd = undefined;
      process.nextTick(onReady);
    } else if (cfg.tls) {
      // Node checks the certificate against its CA store (or only --tls-ca's) and the server's name.
      const options = { host: cfg.host, port: cfg.port, ca: cfg.ca };
      if (!net.isIP(cfg.host)) options.servername = cfg.host; // SNI takes names, not addresses
      sock = tls.connect(options, onReady);
    } else {
      sock = net.connect({ host: cfg.host, port: cfg.port }, onReady);
    }
    track(sock);
    sock.setNoDelay(true); // moves are tiny and urgent: no Nagle delay
    // Probes after 30 s of silence: a dropped network must not leave a queued bot waiting forever.
    sock.setKeepAlive(true, 30000);
    sock.setTimeout(CONNECT_TIMEOUT_MS);

    sock.on("timeout", () => {
      const text = `connection to ${address} failed: no answer in ${CONNECT_TIMEOUT_MS / 1000} s`;
      finish({ kind: "connection", text });
    });

    sock.on("data", (chunk) => {
      if (done) return;
      if (!heard && !cfg.tls && chunk.length >= 2 && (chunk[0] === 0x15 || chunk[0] === 0x16) && chunk[1] === 0x03) {
        // A TLS record (an alert or a handshake) where a frame length belongs: a TLS server.
        finish({ kind: "tls", text: `the server at ${address} speaks TLS; connect with --tls` });
        return;
      }
      heard = true;
      let messages;
      try {
        messages = reader.feed(chunk);
      } catch (err) {
        finish({ kind: "protocol", text: `cannot read the server: ${err.message}` });
        return;
      }
      for (const msg of messages) {
        onMessage(msg);
        if (done) return;
      }
    });

    sock.on("error", (err) => {
      if (cfg.tls && !ready && !NETWORK_ERRORS.has(err.code)) {
        finish({
          kind: "tls",
          text:
            `TLS handshake with ${address} failed: ${err.message}${err.code ? ` (${err.code})` : ""}; ` +
            "check that --tls-ca names the CA that signed the server's certificate (without it Node's CA " +
            "store is used) and that --host is a name the certificate is for; if that port is a plain " +
            "server, drop --tls",
        });
        return;
      }
      finish({ kind: "connection", text: `connection to ${address} failed: ${err.message}` });
    });

    sock.on("close", () => {
      const hint = !heard && !cfg.tls ? "; if that port serves TLS, connect with --tls" : "";
      const text = `the server at ${address} closed the connection before the match ended${hint}`;
      finish({ kind: "connection", text });
    });
  });
}

// ------------------------------------------------------------------ a match elsewhere
// A ladder sent this bot to the host of its match (docs/protocol.md, `redirect`): play it there with
// the seat token given. A connection lost mid-match is taken up again (the seat waits for the
// ladder's grace); anything else is reported as the match's failure, and the bot goes back to the
// ladder. A token never goes in clear to another machine when the ladder was reached over TLS.
async function playRedirected(cfg, target, rng, log, track) {
  const where = `${target.host}:${target.port}`;
  const loopback = target.host === "localhost" || target.host === "::1" || /^127\./.test(target.host);
  if (!target.tls && cfg.tls && !loopback) {
    return {
      kind: "connection",
      text: `the ladder sent this bot to ${where} without TLS, which would send its seat token in clear; not going`,
    };
  }
  log(`playing this match at ${where}`);
  const there = { ...cfg, host: target.host, port: target.port, token: target.token, tls: target.tls };
  let outcome;
  for (let attempt = 1; attempt <= FOLLOW_ATTEMPTS; attempt++) {
    outcome = await playOnce(there, rng, log, track);
    if (outcome.kind !== "connection") break;
    if (attempt < FOLLOW_ATTEMPTS) log(`${outcome.text}; connecting there again`);
    await new Promise((resolve) => setTimeout(resolve, 200 * attempt));
  }
  if (outcome.kind === "redirect") return { kind: "protocol", text: `${where} redirected this bot again` };
  if (outcome.kind === "error") {
    // The match host's refusal is the match's failure, not the bot's: back to the ladder.
    return { kind: "connection", text: `the match host ${where} refused this bot: ${outcome.text}` };
  }
  return outcome;
}

// ------------------------------------------------------------------ many matches
// Waits before the next attempt: the n-th failure in a row waits a random time between half of and
// the whole of min(60, 2^(n-1)) seconds (0.5-1 s, 1-2 s, ... 30-60 s). A lock-out's message says how
// long it lasts; the wait is at least that.
function backoff(failures, serverMessage) {
  const ceiling = Math.min(BACKOFF_CAP_S, BACKOFF_FIRST_S * 2 ** Math.min(failures - 1, 32));
  let wait = ceiling / 2 + Math.random() * (ceiling / 2);
  const hint = /for (?:another )?(\d+(?:\.\d+)?) ?s\b/.exec(serverMessage || "");
  if (hint) wait = Math.max(wait, Number(hint[1]) + Math.random());
  return wait;
}

async function main() {
  const cfg = settings();
  const rng = makeRng(cfg.seed);
  const log = (text) => process.stderr.write(`js_random: ${text}\n`);
  // With one match, any failure ends the run at once: the host that started the bot wants to know.
  const keepTrying = cfg.ladder || cfg.matches > 1;
  let played = 0;
  let failures = 0;
  let current = null; // the open socket, closed when a signal stops the bot
  let timer = null; // the back-off's

  for (const [signal, code] of [
    ["SIGINT", EXIT.INTERRUPTED],
    ["SIGTERM", EXIT.OK],
  ]) {
    process.on(signal, () => {
      log(`stopped by ${signal} after ${played} matches`);
      if (current) current.destroy();
      if (timer) clearTimeout(timer);
      process.exit(code);
    });
  }

  while (played < cfg.matches) {
    const track = (sock) => {
      current = sock;
    };
    let outcome = await playOnce(cfg, rng, log, track);
    if (outcome.kind === "redirect") outcome = await playRedirected(cfg, outcome.target, rng, log, track);
    if (outcome.kind === "end") {
      played += 1;
      failures = 0;
      if (played < cfg.matches) {
        const of = cfg.matches === Infinity ? "" : ` of ${cfg.matches}`;
        log(`match ${played}${of} played; connecting for the next`);
      }
      continue;
    }
    const later = outcome.kind === "connection" || (outcome.kind === "error" && RETRY_LATER.has(outcome.code));
    if (keepTrying && later) {
      failures += 1;
      const wait = backoff(failures, outcome.message);
      log(`${outcome.text}; trying again in ${wait.toFixed(1)} s`);
      await new Promise((resolve) => {
        timer = setTimeout(resolve, wait * 1000);
      });
      timer = null;
      continue;
    }
    let text = outcome.text;
    if (outcome.kind === "error") {
      const fix = [FIX[outcome.code], keepTrying ? "not trying again: waiting cannot fix this" : undefined];
      text += fix.filter(Boolean).map((f) => `; ${f}`).join("");
    }
    log(`${text}${keepTrying ? ` (after ${played} matches)` : ""}`);
    process.exitCode = { error: EXIT.SERVER_ERROR, protocol: EXIT.PROTOCOL }[outcome.kind] ?? EXIT.CONNECTION;
    return;
  }
  process.exitCode = EXIT.OK;
}

main();
