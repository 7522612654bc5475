// The wire protocol of docs/protocol.md, without I/O: its constants, its error codes with their retry
// rule, the message shapes, and frames (a 4-byte big-endian length, then one msgpack map).
//
// The numbers and codes here mirror cellarena.sdk.protocol (sdk/protocol/codes.py); a test of the
// Python package checks that both lists stay equal.

import { decode, encode } from "@msgpack/msgpack";

export const PROTOCOL_VERSION = 1;
/** Largest frame body a client may send (hello, moves); the server refuses a larger one unread. */
export const MAX_CLIENT_FRAME = 65536;
/** Largest frame body the server sends (spectator frames of the biggest worlds). */
export const MAX_SERVER_FRAME = 67108864;
/** Longest bot name, in characters (Unicode code points). */
export const MAX_NAME = 64;
/** The server messages added after version 1 that this kit handles (the hello's `accepts`). */
export const ACCEPTS: readonly string[] = ["redirect"];

/** Every `error` code, in the order docs/protocol.md lists them. */
export const ERROR_CODES = [
  "bad_frame",
  "too_large",
  "bad_message",
  "bad_version",
  "bad_hello",
  "seat_taken",
  "unknown_type",
  "timeout",
  "flood",
  "unresponsive",
  "slow_reader",
  "shutdown",
  "internal",
  "busy",
  "queue_full",
  "too_many_connections",
  "locked_out",
  "tls_required",
  "revoked",
  "paused",
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

/** Refusals that mean "not now": a bot that keeps playing waits and comes back. Any other error before
 * a match starts means the bot or its token is wrong, and retrying cannot help. */
export const RETRY_LATER: ReadonlySet<string> = new Set(["shutdown", "busy", "queue_full", "too_many_connections", "locked_out"]);

/** A map as msgpack decodes it: string keys, values of any msgpack type (bin as Uint8Array). */
export type Fields = { [key: string]: unknown };

export interface Hello {
  type: "hello";
  protocol: number;
  name: string;
  game: string;
  role: "bot" | "spectator";
  token?: string;
  accepts?: string[];
}

export interface Welcome {
  type: "welcome";
  protocol: number;
  role: string;
  /** Your seat, 0-based; absent for spectators. */
  seat?: number;
  game: string;
  match: number;
  players: number;
  names: string[];
  /** Ticks per second; 0 in fast mode. */
  tick_rate: number;
  budget_ms: number;
  /** The game's settings (each game's module reads them). */
  config: Fields;
}

/** The fields every game's `tick` has; the rest is the game's observation. */
export interface TickBase {
  type: "tick";
  tick: number;
  budget_ms: number;
}

export interface End {
  type: "end";
  ticks: number;
  result: "win" | "loss" | "draw";
  rank: number;
  ranks: number[];
  winner: number | null;
  reason: string;
  late: number;
  invalid: number;
  illegal: number;
}

export interface ErrorMessage {
  type: "error";
  code: string;
  message: string;
}

export interface Redirect {
  type: "redirect";
  host: string;
  port: number;
  token: string;
  tls: boolean;
}

/** Bad input from the server: `code` is one of ERROR_CODES, the text says what and why. */
export class ProtocolError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(`${code}: ${message}`);
    this.name = "ProtocolError";
  }
}

export function hello(name: string, game: string, token?: string, accepts: readonly string[] = ACCEPTS): Hello {
  const message: Hello = { type: "hello", protocol: PROTOCOL_VERSION, name, game, role: "bot" };
  if (token !== undefined) message.token = token;
  if (accepts.length) message.accepts = [...accepts];
  return message;
}

/** One frame: the length prefix and the msgpack body. A message over the client limit is an Error. */
export function encodeFrame(message: object): Buffer {
  const body = encode(message);
  if (body.byteLength > MAX_CLIENT_FRAME) {
    throw new Error(`a client frame may hold ${MAX_CLIENT_FRAME} bytes at most, this one ${body.byteLength}`);
  }
  const frame = Buffer.alloc(4 + body.byteLength);
  frame.writeUInt32BE(body.byteLength, 0);
  frame.set(body, 4);
  return frame;
}

/** Reassembles frames from stream chunks of any size: a frame may span chunks, a chunk hold several. */
export class FrameReader {
  private buffer: Buffer = Buffer.alloc(0);

  constructor(readonly limit: number = MAX_SERVER_FRAME) {}

  /** The messages completed by `chunk`; a ProtocolError when the stream cannot be a cellarena one. */
  feed(chunk: Uint8Array): Fields[] {
    this.buffer = this.buffer.length ? Buffer.concat([this.buffer, chunk]) : Buffer.from(chunk);
    const out: Fields[] = [];
    while (this.buffer.length >= 4) {
      const length = this.buffer.readUInt32BE(0);
      if (length > this.limit) {
        throw new ProtocolError("too_large", `a frame of ${length} bytes is over the limit of ${this.limit}`);
      }
      if (this.buffer.length < 4 + length) break;
      out.push(decodeBody(this.buffer.subarray(4, 4 + length)));
      this.buffer = this.buffer.subarray(4 + length);
    }
    return out;
  }
}

/** One frame body as a message: a msgpack map with a string `type`. */
export function decodeBody(body: Uint8Array): Fields {
  let value: unknown;
  try {
    value = decode(body);
  } catch (err) {
    throw new ProtocolError("bad_frame", `a frame body is not one msgpack value (${(err as Error).message})`);
  }
  if (!isMap(value)) throw new ProtocolError("bad_frame", "a frame body is not a msgpack map");
  if (typeof value.type !== "string") throw new ProtocolError("bad_message", "a message without a string 'type'");
  return value;
}

export function isMap(value: unknown): value is Fields {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Uint8Array);
}

// ------------------------------------------------------------------ field checks
// Each names the message and the field, as the server's own errors do.

export function int(message: Fields, key: string, kind: string): number {
  const value = message[key];
  if (typeof value !== "number" || !Number.isInteger(value)) {
    throw new ProtocolError("bad_message", `${kind}: the field '${key}' must be an int (got ${describe(value)})`);
  }
  return value;
}

export function num(message: Fields, key: string, kind: string): number {
  const value = message[key];
  if (typeof value !== "number") {
    throw new ProtocolError("bad_message", `${kind}: the field '${key}' must be a number (got ${describe(value)})`);
  }
  return value;
}

export function str(message: Fields, key: string, kind: string): string {
  const value = message[key];
  if (typeof value !== "string") {
    throw new ProtocolError("bad_message", `${kind}: the field '${key}' must be a string (got ${describe(value)})`);
  }
  return value;
}

export function bool(message: Fields, key: string, kind: string): boolean {
  const value = message[key];
  if (typeof value !== "boolean") {
    throw new ProtocolError("bad_message", `${kind}: the field '${key}' must be a bool (got ${describe(value)})`);
  }
  return value;
}

export function bin(message: Fields, key: string, kind: string): Uint8Array {
  const value = message[key];
  if (!(value instanceof Uint8Array)) {
    throw new ProtocolError("bad_message", `${kind}: the field '${key}' must be bytes (got ${describe(value)})`);
  }
  return value;
}

export function list(message: Fields, key: string, kind: string): unknown[] {
  const value = message[key];
  if (!Array.isArray(value)) {
    throw new ProtocolError("bad_message", `${kind}: the field '${key}' must be an array (got ${describe(value)})`);
  }
  return value;
}

export function ints(message: Fields, key: string, kind: string): number[] {
  const value = list(message, key, kind);
  if (!value.every((v) => typeof v === "number" && Number.isInteger(v))) {
    throw new ProtocolError("bad_message", `${kind}: the field '${key}' must be an array of ints`);
  }
  return value as number[];
}

export function describe(value: unknown): string {
  if (value === undefined) return "nothing";
  if (value === null) return "nil";
  if (value instanceof Uint8Array) return `${value.length} bytes`;
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") return "a map";
  return `${typeof value} ${JSON.stringify(value)}`;
}

export function checkWelcome(m: Fields): Welcome {
  const kind = "welcome";
  const welcome: Welcome = {
    type: "welcome",
    protocol: int(m, "protocol", kind),
    role: str(m, "role", kind),
    game: str(m, "game", kind),
    match: int(m, "match", kind),
    players: int(m, "players", kind),
    names: list(m, "names", kind).map(String),
    tick_rate: num(m, "tick_rate", kind),
    budget_ms: int(m, "budget_ms", kind),
    config: isMap(m.config) ? m.config : {},
  };
  if (m.seat !== undefined && m.seat !== null) welcome.seat = int(m, "seat", kind);
  return welcome;
}

export function checkTick(m: Fields): TickBase {
  return { type: "tick", tick: int(m, "tick", "tick"), budget_ms: int(m, "budget_ms", "tick") };
}

export function checkEnd(m: Fields): End {
  const kind = "end";
  const result = str(m, "result", kind);
  if (result !== "win" && result !== "loss" && result !== "draw") {
    throw new ProtocolError("bad_message", `end: the field 'result' must be win, loss or draw (got ${JSON.stringify(result)})`);
  }
  const winner = m.winner === null || m.winner === undefined ? null : int(m, "winner", kind);
  return {
    type: "end",
    ticks: int(m, "ticks", kind),
    result,
    rank: int(m, "rank", kind),
    ranks: ints(m, "ranks", kind),
    winner,
    reason: str(m, "reason", kind),
    late: int(m, "late", kind),
    invalid: int(m, "invalid", kind),
    illegal: int(m, "illegal", kind),
  };
}

export function checkRedirect(m: Fields): Redirect {
  const kind = "redirect";
  const redirect: Redirect = {
    type: "redirect",
    host: str(m, "host", kind),
    port: int(m, "port", kind),
    token: str(m, "token", kind),
    tls: bool(m, "tls", kind),
  };
  if (!redirect.host || redirect.port < 1 || redirect.port > 65535) {
    throw new ProtocolError("bad_message", `redirect: no host, or a port outside 1-65535 (${redirect.port})`);
  }
  return redirect;
}
