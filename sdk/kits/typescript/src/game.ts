// What the bot loop needs from a game: its name, how a `tick` message becomes the view a bot's onTick
// gets, and how onTick's answer becomes the `moves` field. Each module under games/ exports one `game`.
// The loop in bot.ts names no game.

import type { Fields } from "./protocol.js";

/** What onTick returned cannot be sent; the message says why (the tick then counts as invalid). */
export class MovesError extends Error {
  override name = "MovesError";
}

export interface Game<View, Answer, Settings> {
  /** The game's name in `hello`. */
  readonly name: string;
  /** The view of a `tick` message; a ProtocolError (bad_message) names a malformed field. */
  makeView(message: Fields): View;
  /** The `moves` field for an answer; a MovesError says what is wrong with it. */
  encodeAnswer(answer: Answer, message: Fields): unknown;
  /** The answer that does nothing this tick. */
  idleAnswer(view: View): Answer;
  /** The `welcome`'s config, typed; forgiving (a missing or odd entry keeps its default). */
  parseConfig(config: Fields): Settings;
}

/** A game of any view, answer and settings, as the loop sees it. */
export type AnyGame = Game<any, any, any>;

/** Reads `config[key]` when it has the type of `fallback`, else `fallback`. */
export function setting<T extends string | number | boolean>(config: Fields, key: string, fallback: T): T {
  const value = config[key];
  return typeof value === typeof fallback ? (value as T) : fallback;
}

export function isInt(value: unknown): value is number {
  return typeof value === "number" && Number.isInteger(value);
}
