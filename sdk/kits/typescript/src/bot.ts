// The bot loop: `play` plays one match on an open connection; `run` connects, plays one match or many
// (--matches N, --ladder), follows a ladder's redirects, comes back to its seat after a lost connection,
// and backs off after refusals that mean "not now" (RETRY_LATER). It mirrors the Python SDK's `run`.
//
// The loop is forgiving on purpose: an exception in onTick, or an answer the game cannot encode, costs
// that tick (sent without its `moves` field, which the server counts as invalid in every game) and a line
// on stderr, never the connection, so one bug does not forfeit a whole match.

import { Backoff } from "./backoff.js";
import { ClientError, Connection, ConnectionClosedError, ServerError, TLSError } from "./connection.js";
import { Debug } from "./debug.js";
import { type Game, MovesError } from "./game.js";
import {
  ACCEPTS,
  checkEnd,
  encodeFrame,
  checkRedirect,
  checkTick,
  checkWelcome,
  type End,
  type Fields,
  hello,
  PROTOCOL_VERSION,
  ProtocolError,
  type Redirect,
  RETRY_LATER,
} from "./protocol.js";
import { parseSettings, type Settings, UsageError, USAGE } from "./settings.js";

/** The `welcome`: your seat and the match's settings (`settings` typed by the game). */
export interface MatchInfo<S> {
  seat: number | undefined;
  players: number;
  names: string[];
  game: string;
  match: number;
  /** Ticks per second; 0 in fast mode. */
  tickRate: number;
  budgetMs: number;
  /** The game's settings as sent. */
  config: Fields;
  settings: S;
}

/** The `end`: how the match ended for you (the message's fields, without its type). */
export type MatchResult = Omit<End, "type">;

/** A bot of a game: each game module names its own (`RezzoBot`, `CataBot`, ...). onTick may be async.
 * `debug` is this tick's drawing for your own eyes (`debug.mark`, `debug.line`, `debug.log`; see
 * debug.ts): sent with the answer, kept in the replay, drawn by the web player. A bot may leave it out. */
export interface Bot<View, Answer, S> {
  onStart?(info: MatchInfo<S>): void;
  onTick(view: View, debug: Debug): Answer | Promise<Answer>;
  onEnd?(result: MatchResult): void;
}

/** The exit statuses of `run`: played (or stopped by SIGTERM), could not go on, bad usage, Ctrl-C. */
export const EXIT = { OK: 0, FAILED: 1, USAGE: 2, INTERRUPTED: 130 } as const;
/** Connections to a match host tried before a redirected match is given up. */
export const FOLLOW_ATTEMPTS = 3;
/** Tries to take a seat back after a connection lost mid-match, and the wait before each (ms): a ladder
 * keeps a seat for its grace, a few seconds (docs/protocol.md, "Joining a ladder"). */
export const REJOIN_WAITS_MS = [250, 500, 1000];

// What to do about an error that waiting cannot fix, said with it.
const FIX: Record<string, string> = {
  bad_hello: "check the bot's token (--token-file, --token or CELLARENA_TOKEN) and its game",
  bad_version: `this kit speaks protocol ${PROTOCOL_VERSION}; update it`,
  tls_required: "connect with --tls",
  revoked: "ask the ladder's host for the bot's current token",
  paused: "the ladder paused this bot (the message says why); fix it, then resume it on your page on the ladder or with `cellarena ladder resume`",
};

export type Log = (text: string) => void;

/** A redirect arrived: this match is played at the target's address (not a failure). */
export class Redirected extends Error {
  override name = "Redirected";
  constructor(readonly target: Redirect) {
    super(`redirected to ${target.host}:${target.port}`);
  }
}

/** The match was lost mid-way (after its welcome): the seat may be taken back within the grace. */
class LostMidMatch extends ClientError {
  override name = "LostMidMatch";
}

/** Plays one match on `conn` (hello sent) and returns its result. A ServerError, ClientError or
 * ProtocolError says why the match cannot go on; a Redirected that it is played elsewhere. */
export async function play<View, Answer, S>(
  game: Game<View, Answer, S>,
  bot: Bot<View, Answer, S>,
  conn: Connection,
  log: Log,
  quiet = false,
): Promise<MatchResult> {
  let started = false;
  let slow = 0;
  let skipped = 0;
  const debug = new Debug();
  const said = { debug: false };
  const unknown = new Set<string>();
  for (;;) {
    let message: Fields;
    try {
      message = await conn.recv();
    } catch (err) {
      if (started && err instanceof ConnectionClosedError) throw new LostMidMatch(err.message);
      throw err;
    }
    switch (message.type) {
      case "welcome": {
        const welcome = checkWelcome(message);
        const info: MatchInfo<S> = {
          seat: welcome.seat,
          players: welcome.players,
          names: welcome.names,
          game: welcome.game,
          match: welcome.match,
          tickRate: welcome.tick_rate,
          budgetMs: welcome.budget_ms,
          config: welcome.config,
          settings: game.parseConfig(welcome.config),
        };
        started = true;
        if (!quiet) log(`seat ${info.seat} of ${info.players} in match ${info.match} (${info.game})`);
        guarded(log, "onStart", () => bot.onStart?.(info));
        break;
      }
      case "tick": {
        if (!started) throw new ProtocolError("bad_message", "a tick arrived before the welcome");
        // Answers to old ticks only count as late: when behind, answer the newest.
        while (conn.peek()?.type === "tick") {
          message = await conn.recv();
          if (++skipped === 1) log("fell behind the server; skipping to the newest tick (onTick is too slow?)");
        }
        const next = conn.peek()?.type;
        if (next === "end" || next === "error") break; // the match ended meanwhile: that comes next
        const request = checkTick(message);
        const took = await answer(game, bot, conn, message, log, debug, said);
        if (took > request.budget_ms && ++slow === 1) {
          log(`tick ${request.tick}: onTick took ${took.toFixed(0)} ms, over the ${request.budget_ms} ms budget; late answers are noops (only the first is reported)`);
        }
        break;
      }
      case "end": {
        const end: End = checkEnd(message);
        const { type: _type, ...result } = end;
        if (!quiet) {
          log(`${result.result} (rank ${result.rank}) after ${result.ticks} ticks, ${result.reason}; late ${result.late}, invalid ${result.invalid}, illegal ${result.illegal}`);
        }
        guarded(log, "onEnd", () => bot.onEnd?.(result));
        return result;
      }
      case "redirect":
        if (started) throw new ProtocolError("bad_message", "a redirect arrived in the middle of a match");
        throw new Redirected(checkRedirect(message));
      default: {
        // docs/protocol.md: a later server may add messages; a client logs them and goes on.
        const kind = String(message.type);
        if (!unknown.has(kind)) {
          unknown.add(kind);
          log(`ignoring the server's '${kind}' messages: this kit does not know them`);
        }
      }
    }
  }
}

/** Asks the bot for one tick's answer and sends it; the milliseconds onTick took. */
async function answer<View, Answer, S>(
  game: Game<View, Answer, S>,
  bot: Bot<View, Answer, S>,
  conn: Connection,
  message: Fields,
  log: Log,
  debug: Debug = new Debug(),
  said: { debug: boolean } = { debug: false },
): Promise<number> {
  const view = game.makeView(message);
  const started = performance.now();
  const reply: Fields = { type: "moves", tick: message.tick };
  debug.clear();
  try {
    const moves = game.encodeAnswer(await bot.onTick(view, debug), message);
    reply.moves = moves;
  } catch (err) {
    const why = err instanceof MovesError ? err.message : `onTick threw\n${(err as Error).stack ?? err}`;
    log(`tick ${String(message.tick)}: ${why}; this tick counts as invalid`);
  }
  const took = performance.now() - started;
  addDebug(reply, debug, log, said);
  conn.send(reply);
  return took;
}

/** Puts this tick's drawing in `reply`, unless the frame would pass the protocol's limit (the caps keep
 * it far below; a huge `moves` could not): then the drawing goes, never the move. */
function addDebug(reply: Fields, debug: Debug, log: Log, said: { debug: boolean }): void {
  if (debug.firstProblem !== undefined && !said.debug) {
    said.debug = true;
    log(`debug drawing dropped: ${debug.firstProblem} (only the first is reported; the move is kept)`);
  }
  const drawn = debug.take();
  if (drawn === undefined) return;
  reply.debug = drawn;
  try {
    encodeFrame(reply);
  } catch {
    delete reply.debug;
    debug.dropped += 1;
    if (!said.debug) {
      said.debug = true;
      log(`tick ${String(reply.tick)}: the debug drawing would make the answer too large; sent without it`);
    }
  }
}

function guarded(log: Log, what: string, hook: () => void): void {
  try {
    hook();
  } catch (err) {
    log(`${what} threw; carrying on\n${(err as Error).stack ?? err}`);
  }
}

function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127\./.test(host);
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export interface RunOptions {
  /** Matches to play in a row (the command line's --matches wins). */
  matches?: number;
  /** Keep playing until stopped (the command line's --ladder wins). */
  ladder?: boolean;
  /** The bot's name unless --name or CELLARENA_NAME say otherwise. */
  name?: string;
  argv?: readonly string[];
  env?: NodeJS.ProcessEnv;
  log?: Log;
}

/** The matches one `run` plays, one connection each, with back-off between failed attempts. */
class Series<View, Answer, S> {
  played = 0;
  readonly backoff: Backoff;
  /** With one match, any failure ends the run at once: the host that started the bot wants to know. */
  readonly keepTrying: boolean;
  current: Connection | undefined;

  constructor(
    readonly game: Game<View, Answer, S>,
    readonly makeBot: () => Bot<View, Answer, S>,
    readonly settings: Settings,
    readonly log: Log,
  ) {
    this.keepTrying = settings.ladder || settings.matches > 1;
    this.backoff = new Backoff(settings.backoffFirst);
  }

  done(): boolean {
    return !this.settings.ladder && this.played >= this.settings.matches;
  }

  async playAll(): Promise<number> {
    const s = this.settings;
    let handed = s.handedFd;
    while (!this.done()) {
      const bot = this.makeBot(); // a new bot per match: no state leaks from one match to the next
      try {
        try {
          if (handed !== undefined) {
            const fd = handed;
            handed = undefined; // the launcher's connection is for the first match only
            await this.playHanded(bot, fd);
          } else {
            await this.playAt(bot, s.host, s.port, s.token, s.tls);
          }
        } catch (err) {
          if (!(err instanceof Redirected)) throw err;
          if (!(await this.follow(bot, err.target))) continue;
        }
      } catch (err) {
        if (err instanceof TLSError) return this.fail(err.message);
        if (err instanceof ServerError) {
          if (this.keepTrying && RETRY_LATER.has(err.code)) {
            await this.wait(err.message, err.serverMessage);
            continue;
          }
          const fixes = [FIX[err.code], this.keepTrying ? "not trying again: waiting cannot fix this" : undefined];
          return this.fail(err.message + fixes.filter(Boolean).map((f) => `; ${f}`).join(""));
        }
        if (err instanceof ClientError) {
          if (!this.keepTrying) return this.fail(err.message);
          await this.wait(err.message);
          continue;
        }
        if (err instanceof ProtocolError) return this.fail(`the server sent something this kit cannot read (${err.message})`);
        throw err;
      }
      this.played += 1;
      this.backoff.reset();
      if (!this.done() && !s.quiet) {
        this.log(`match ${this.played}${s.ladder ? "" : ` of ${s.matches}`} played; connecting for the next`);
      }
    }
    return EXIT.OK;
  }

  /** Plays the first match on the connection the launcher made (descriptor `fd`): it owns the seat, so
   * the hello carries no token, and a seat lost mid-match is no one's to take back. */
  async playHanded(bot: Bot<View, Answer, S>, fd: number): Promise<void> {
    const conn = Connection.adopt(fd);
    this.current = conn;
    try {
      conn.send(hello(this.settings.name, this.game.name, undefined, ACCEPTS));
      await play(this.game, bot, conn, this.log, this.settings.quiet);
    } catch (err) {
      if (err instanceof LostMidMatch) throw new ConnectionClosedError(err.message);
      throw err;
    } finally {
      conn.close();
      this.current = undefined;
    }
  }

  /** Connects, says hello, plays one match; a connection lost mid-match takes its seat back (the same
   * bot, the same token) while the host keeps it, then counts as a lost connection. */
  async playAt(bot: Bot<View, Answer, S>, host: string, port: number, token: string | undefined, tls: Settings["tls"]): Promise<void> {
    let lost: LostMidMatch | undefined;
    for (let attempt = 0; ; attempt++) {
      const conn = await Connection.open(host, port, tls, this.game.name);
      this.current = conn;
      try {
        conn.send(hello(this.settings.name, this.game.name, token, ACCEPTS));
        await play(this.game, bot, conn, this.log, this.settings.quiet);
        return;
      } catch (err) {
        if (!(err instanceof LostMidMatch)) {
          // A seat taken back but refused (the grace is over) reports the loss, not the refusal.
          if (lost !== undefined && err instanceof ServerError) throw new ConnectionClosedError(lost.message);
          throw err;
        }
        lost = err;
        // Without a token the seat is no one's to take back (`cellarena serve` seats whoever comes).
        if (token === undefined || attempt >= REJOIN_WAITS_MS.length) throw new ConnectionClosedError(err.message);
        this.log(`${err.message}; taking the seat back`);
        await sleep(REJOIN_WAITS_MS[attempt]);
      } finally {
        conn.close();
        this.current = undefined;
      }
    }
  }

  /** Plays the match a ladder sent this bot to; whether it was played. A failure there is the match's,
   * not the bot's: with more matches to play the bot goes back to the ladder after a wait. */
  async follow(bot: Bot<View, Answer, S>, target: Redirect): Promise<boolean> {
    const where = `the match host ${target.host}:${target.port}`;
    if (!target.tls && this.settings.tls !== undefined && !isLoopback(target.host)) {
      return this.giveUp(`the ladder sent this bot to ${target.host}:${target.port} without TLS, which would send its seat token in clear; not going (tell the ladder's host)`);
    }
    const tls = target.tls ? (this.settings.tls ?? {}) : undefined;
    if (!this.settings.quiet) this.log(`playing this match at ${target.host}:${target.port}`);
    for (let attempt = 1; attempt <= FOLLOW_ATTEMPTS; attempt++) {
      try {
        await this.playAt(bot, target.host, target.port, target.token, tls);
        return true;
      } catch (err) {
        if (err instanceof ServerError) return this.giveUp(`${where} refused this bot: ${err.message}`);
        if (err instanceof Redirected) return this.giveUp(`${where} redirected this bot again; a match host must not`);
        if (err instanceof TLSError) return this.giveUp(`${where}: ${err.message}`);
        if (!(err instanceof ClientError)) throw err;
        if (attempt === FOLLOW_ATTEMPTS) return this.giveUp(`lost ${where} (${err.message})`);
        this.log(`lost ${where} (${err.message}); connecting there again`);
        await sleep(200 * attempt);
      }
    }
    return false;
  }

  async giveUp(text: string): Promise<boolean> {
    if (!this.keepTrying) throw new ClientError(text);
    await this.wait(text);
    return false;
  }

  fail(text: string): number {
    this.log(`error: ${text}${this.keepTrying ? ` (after ${this.played} matches)` : ""}`);
    return EXIT.FAILED;
  }

  async wait(why: string, serverMessage = ""): Promise<void> {
    const seconds = this.backoff.next(serverMessage);
    this.log(`${why}; trying again in ${seconds.toFixed(1)} s`);
    await sleep(seconds * 1000);
  }
}

/** Connects and plays, then resolves with an exit status: `run(rezzo.game, () => new MyBot())`.
 *
 * One match by default; `{matches: N}` plays N in a row and `{ladder: true}` until stopped (SIGINT,
 * SIGTERM), each on a new connection with a new bot; the command line's --matches and --ladder win.
 * 0 once the matches are played or SIGTERM stopped the bot; 1, with one line on stderr, when it cannot go
 * on; 2 for a bad command line; 130 on Ctrl-C. With one match that is any failure; with more, the bot
 * waits and comes back after a lost connection or a refusal in RETRY_LATER, and stops only on an error
 * that waiting cannot fix (a wrong token, another protocol version, a refused TLS handshake). */
export async function run<View, Answer, S>(
  game: Game<View, Answer, S>,
  makeBot: () => Bot<View, Answer, S>,
  options: RunOptions = {},
): Promise<number> {
  const env = options.env ?? process.env;
  let settings: Settings;
  const fallbackName = options.name ?? game.name + "_bot";
  const early: Log = options.log ?? ((text) => process.stderr.write(`${fallbackName}: ${text}\n`));
  const argv = options.argv ?? process.argv.slice(2);
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(USAGE);
    return EXIT.OK;
  }
  try {
    settings = parseSettings(argv, env, { name: fallbackName, matches: options.matches, ladder: options.ladder });
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    early(`${err.message}\n${USAGE}`);
    return EXIT.USAGE;
  }
  const log: Log = options.log ?? ((text) => process.stderr.write(`${settings.name}: ${text}\n`));
  const series = new Series(game, makeBot, settings, log);
  const stopped = new Promise<number>((resolve) => {
    const stop = (signal: string, code: number) => () => {
      log(`stopped by ${signal} after ${series.played} matches`);
      series.current?.close();
      resolve(code);
    };
    process.once("SIGINT", stop("SIGINT", EXIT.INTERRUPTED));
    process.once("SIGTERM", stop("SIGTERM", EXIT.OK));
  });
  return Promise.race([series.playAll(), stopped]);
}

/** `run` as a program's main: sets the exit status and exits once it resolves (timers of a back-off or a
 * signal's race are not left to keep node alive). */
export function main<View, Answer, S>(game: Game<View, Answer, S>, makeBot: () => Bot<View, Answer, S>, options: RunOptions = {}): void {
  run(game, makeBot, options).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`${(err as Error).stack ?? err}\n`);
      process.exit(EXIT.FAILED);
    },
  );
}
