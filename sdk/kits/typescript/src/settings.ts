// A bot's settings: flags first, then the CELLARENA_* variables that `cellarena match`, tournaments and
// a ladder's house bots set, then the defaults. A launcher hands over the seat as docs/protocol.md says
// ("Bots that cellarena starts"): a connection that owns it (CELLARENA_SOCKET_FD), or else its token in
// a pipe whose descriptor CELLARENA_TOKEN_FD names, read once and closed, so that no other process finds
// the token in this one's environment.

import * as fs from "node:fs";

import { MAX_NAME } from "./protocol.js";

export const DEFAULT_HOST = "127.0.0.1";
export const DEFAULT_PORT = 7777;

export interface Settings {
  host: string;
  port: number;
  name: string;
  /** The token for `hello`; never logged. */
  token?: string;
  /** Matches to play in a row (1 unless --matches); ignored with `ladder`. */
  matches: number;
  /** Keep playing until stopped, queueing again after each match. */
  ladder: boolean;
  /** Connect over TLS: `{}` checks against Node's CA store, `{ca}` against that PEM file only. */
  tls?: { ca?: string };
  /** Only report problems on stderr. */
  quiet: boolean;
  /** CELLARENA_SOCKET_FD: a connection the launcher made (usually descriptor 0), which owns the seat; the
   * first match is played on it, without a token. */
  handedFd?: number;
  /** CELLARENA_BACKOFF_FIRST_S: the longest wait of the back-off's first round (1 s). For tests, which set
   * milliseconds so that a retry is quick; a server's "for another N s" is still waited out. */
  backoffFirst: number;
}

/** A command line or variable that cannot be used; `run` prints it with the usage and exits 2. */
export class UsageError extends Error {
  override name = "UsageError";
}

export const USAGE =
  "usage: node BOT.js [--host H] [--port P] [--name N] [--token-file PATH | --token T]\n" +
  "                   [--matches N | --ladder] [--tls] [--tls-ca PATH] [-q]\n" +
  "--host, --port, --name and the token default to CELLARENA_HOST, CELLARENA_PORT, CELLARENA_NAME and\n" +
  "CELLARENA_TOKEN_FD (a pipe holding the seat token) or CELLARENA_TOKEN; `cellarena match` sets them.\n" +
  "CELLARENA_SOCKET_FD names a connection the launcher made, owning the seat: the first match is played on it.\n" +
  "Other users can read a command line: give a ladder token with --token-file, not --token.\n" +
  "--matches N plays N matches in a row; --ladder keeps playing until stopped, waiting 0.5-1 s after a\n" +
  "lost connection or a 'not now' refusal, twice as long after each failure in a row (at most 60 s);\n" +
  "CELLARENA_BACKOFF_FIRST_S sets the first round's longest wait (default 1 s; tests set less).\n";

const VALUED = new Set(["host", "port", "name", "token", "token-file", "matches", "tls-ca"]);

/** The settings from `argv` (without node and the script) and `env`; `defaults` are what the bot's code
 * asked for (`run(bot, {matches: 3})`), which flags override. A UsageError says what is wrong. */
export function parseSettings(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  defaults: { name: string; matches?: number; ladder?: boolean },
  readToken: (env: NodeJS.ProcessEnv) => string | undefined = seatToken,
): Settings {
  const flags = new Map<string, string | true>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(arg);
    if (arg === "-q" || arg === "--quiet") {
      flags.set("quiet", true);
    } else if (m && VALUED.has(m[1])) {
      let value = m[2];
      if (value === undefined) {
        if (i + 1 >= argv.length) throw new UsageError(`${arg} needs a value`);
        value = argv[++i];
      }
      flags.set(m[1], value);
    } else if (m && (m[1] === "tls" || m[1] === "ladder") && m[2] === undefined) {
      flags.set(m[1], true);
    } else {
      throw new UsageError(`unknown argument ${JSON.stringify(arg)}`);
    }
  }
  const text = (key: string, envKey: string, fallback: string): string => {
    const flag = flags.get(key);
    if (typeof flag === "string") return flag;
    const value = (env[envKey] ?? "").trim();
    return value || fallback;
  };
  const host = text("host", "CELLARENA_HOST", DEFAULT_HOST);
  const portText = text("port", "CELLARENA_PORT", String(DEFAULT_PORT));
  const port = Number(portText);
  if (!/^\d+$/.test(portText) || port < 1 || port > 65535) {
    const where = flags.has("port") ? "--port" : "CELLARENA_PORT";
    throw new UsageError(`${where} must be a port number (1-65535), got ${JSON.stringify(portText)}`);
  }
  const name = text("name", "CELLARENA_NAME", defaults.name);
  const length = [...name].length;
  if (length < 1 || length > MAX_NAME) throw new UsageError(`--name must be 1 to ${MAX_NAME} characters, got ${length}`);
  if (flags.has("matches") && flags.has("ladder")) {
    throw new UsageError("--matches N plays N matches and --ladder plays until stopped: give one of them");
  }
  if (flags.has("token") && flags.has("token-file")) throw new UsageError("--token and --token-file: give one of them");
  let matches = defaults.matches ?? 1;
  let ladder = defaults.ladder ?? false;
  const matchesFlag = flags.get("matches");
  if (typeof matchesFlag === "string") {
    matches = Number(matchesFlag);
    ladder = false;
    if (!/^\d+$/.test(matchesFlag) || matches < 1) {
      throw new UsageError(`--matches must be 1 or more, got ${JSON.stringify(matchesFlag)}`);
    }
  }
  if (flags.has("ladder")) ladder = true;
  let handedFd: number | undefined;
  const handed = (env.CELLARENA_SOCKET_FD ?? "").trim();
  if (handed) {
    if (!/^\d{1,9}$/.test(handed)) {
      throw new UsageError(`CELLARENA_SOCKET_FD: ${JSON.stringify(handed)} is not a descriptor number; unset it to connect to --host/--port instead`);
    }
    handedFd = Number(handed);
  }
  const firstText = (env.CELLARENA_BACKOFF_FIRST_S ?? "").trim();
  const backoffFirst = firstText ? Number(firstText) : 1;
  if (!(backoffFirst > 0 && backoffFirst <= 60)) {
    throw new UsageError(`CELLARENA_BACKOFF_FIRST_S must be seconds in (0, 60], got ${JSON.stringify(firstText)}; unset it for 1 s`);
  }
  let token: string | undefined;
  const tokenFile = flags.get("token-file");
  const tokenFlag = flags.get("token");
  if (typeof tokenFile === "string") {
    token = readTokenFile(tokenFile);
  } else if (typeof tokenFlag === "string" && tokenFlag.trim()) {
    token = tokenFlag.trim();
  } else if (handedFd === undefined) {
    token = readToken(env); // with a handed connection, which owns the seat, no token is needed or read
  }
  const ca = flags.get("tls-ca");
  let tls: Settings["tls"];
  if (typeof ca === "string") {
    if (!fs.existsSync(ca)) throw new UsageError(`--tls-ca ${ca}: no such file (a PEM file of CA certificates is wanted)`);
    tls = { ca };
  } else if (flags.has("tls")) {
    tls = {};
  }
  return { host, port, name, token, matches, ladder, tls, quiet: flags.has("quiet"), handedFd, backoffFirst };
}

function readTokenFile(path: string): string {
  let text: string;
  try {
    text = fs.readFileSync(path, "utf8").trim();
  } catch (err) {
    throw new UsageError(`--token-file ${path}: cannot read it (${(err as NodeJS.ErrnoException).code ?? err})`);
  }
  if (!text) throw new UsageError(`--token-file ${path}: the file is empty`);
  return text;
}

/** The seat token a launcher handed over: the first line of the pipe CELLARENA_TOKEN_FD names, read once
 * and closed; else CELLARENA_TOKEN (a token you set yourself); else none. */
export function seatToken(env: NodeJS.ProcessEnv): string | undefined {
  const fdText = (env.CELLARENA_TOKEN_FD ?? "").trim();
  if (/^\d+$/.test(fdText)) {
    const fd = Number(fdText);
    try {
      const line = fs.readFileSync(fd, "utf8").split("\n")[0].trim();
      fs.closeSync(fd);
      if (line) return line;
    } catch (err) {
      // Said without the token (there is none to say): the pipe was not there or not readable.
      process.stderr.write(`cannot read the seat token from descriptor ${fd} (CELLARENA_TOKEN_FD): ${(err as Error).message}\n`);
    }
  }
  return (env.CELLARENA_TOKEN ?? "").trim() || undefined;
}
