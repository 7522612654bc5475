// 2dFDCAL, drop2df (docs/games/drop2df.md): every seat plays its own copy of the same row, and gets a
// tick each turn. The answer is a list of ops: a cell number edits that cell, [face, i] spends a token.

import type { Bot } from "../bot.js";
import { type Game, isInt, MovesError, setting } from "../game.js";
import { bin, type Fields, int, ints, list } from "../protocol.js";

/** Cell codes of the row; byte 0 and the last byte are the holes. */
export const Cell = { EMPTY: 0, PLUS: 1, MINUS: 2, BLOCK: 3, RABBIT: 4, HOLE: 5 } as const;
/** Token faces. */
export const Face = { BLANK: 0, PLUS: 1, MINUS: 2 } as const;
export const MAX_OPS = 8;

/** One op: edit cell i, or spend the token of `face` on cell i. */
export type Op = number | [number, number];
/** The ops, done in order; [] or null passes. */
export type Answer = Op[] | null;

export interface View {
  tick: number;
  budgetMs: number;
  /** This turn, 1..turns. */
  turn: number;
  turns: number;
  /** Your row before this turn's edit, one cell code per byte. */
  row: Uint8Array;
  score: number;
  /** Your token faces left, ascending. */
  tokens: number[];
  /** Why ops of your previous answer were refused. */
  refused: string[];
  receivedAt: number;
}

export interface Settings {
  players: number;
  /** The dice spaces between the two holes. */
  length: number;
  dice: number;
  turns: number;
  tokens: boolean;
  /** The row every seat starts from (its `cells` codes). */
  start: Uint8Array;
}

export const game: Game<View, Answer, Settings> = {
  name: "drop2df",
  makeView(m: Fields): View {
    const k = "tick";
    return {
      tick: int(m, "tick", k),
      budgetMs: int(m, "budget_ms", k),
      turn: int(m, "turn", k),
      turns: int(m, "turns", k),
      row: bin(m, "row", k),
      score: int(m, "score", k),
      tokens: ints(m, "tokens", k),
      refused: list(m, "refused", k).map(String),
      receivedAt: performance.now(),
    };
  },
  encodeAnswer(answer: Answer): Op[] {
    if (answer === null) return [];
    if (!Array.isArray(answer)) throw new MovesError(`a drop2df answer is a list of ops, got ${JSON.stringify(answer)}`);
    if (answer.length > MAX_OPS) throw new MovesError(`${answer.length} ops, at most ${MAX_OPS}`);
    for (const op of answer) {
      const ok = isInt(op) || (Array.isArray(op) && op.length === 2 && op.every(isInt));
      if (!ok) throw new MovesError(`an op is a cell number or [face, cell]; got ${JSON.stringify(op)}`);
    }
    return answer;
  },
  idleAnswer(): Answer {
    return [];
  },
  parseConfig(c: Fields): Settings {
    return {
      players: setting(c, "players", 2),
      length: setting(c, "length", 8),
      dice: setting(c, "dice", 2),
      turns: setting(c, "turns", 30),
      tokens: setting(c, "tokens", false),
      start: c.start instanceof Uint8Array ? c.start : new Uint8Array(0),
    };
  },
};

export type Drop2dfBot = Bot<View, Answer, Settings>;
