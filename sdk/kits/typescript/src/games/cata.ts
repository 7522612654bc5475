// C.A.T.A. (docs/games/cata.md): turn-based; each tick asks the one seat to move for one move. The
// board is a packed bit plane (a set bit is white); the rule is 32 entries, 0-15 black's, 16-31 white's.

import type { Bot } from "../bot.js";
import { type Game, isInt, MovesError, setting } from "../game.js";
import { bin, bool, type Fields, int, ints, isMap } from "../protocol.js";

/** A move's code: the first element of the answer. */
export const Action = { PASS: 0, STRIKE: 1, BLOCK: 2, MEDITATE: 3 } as const;
export type Action = (typeof Action)[keyof typeof Action];
export const RULE_ENTRIES = 32;
/** Colours, which are also seats. */
export const BLACK = 0;
export const WHITE = 1;

/** One move: [code, rule entry 0-31] (send entry 0 with PASS and MEDITATE, where it is ignored). */
export type Answer = [Action, number];

export interface Refused {
  tick: number;
  move: [number, number];
  reason: string;
}

export interface View {
  tick: number;
  budgetMs: number;
  /** Your seat, which is also your colour: 0 black, 1 white. */
  seat: number;
  /** The board's side n. */
  size: number;
  /** The n x n board, packed bits (numpy.packbits order): use `cell(view, row, col)`. */
  board: Uint8Array;
  /** Entry i = 16C + 8U + 4R + 2D + L, each 0 (black) or 1 (white). */
  rule: number[];
  /** Both seats' health in cells, by seat. */
  health: [number, number];
  cellsPerHp: number;
  turn: number;
  /** This move's place in the turn, 0-3. */
  move: number;
  movesLeft: number;
  blocked: boolean;
  meditated: boolean;
  opponentMeditated: boolean;
  /** Your previous move, if it was illegal. */
  refused: Refused | null;
  /** The last reaction phase as sent (docs/protocol.md lists its fields), or null. */
  lastReaction: Fields | null;
  receivedAt: number;
}

export interface Settings {
  size: number;
  maxTurns: number;
  maxGenerations: number;
  cellsPerHp: number;
  startHealth: number;
  torus: boolean;
}

/** The colour (0 black, 1 white) of the board's cell at `row`, `col`. */
export function cell(view: Pick<View, "board" | "size">, row: number, col: number): number {
  const k = row * view.size + col;
  return (view.board[k >> 3] >> (7 - (k & 7))) & 1;
}

/** Every legal move now (docs/protocol.md's rules), strikes first. */
export function legalMoves(view: View): Answer[] {
  const other = 1 - view.seat;
  const strikes: Answer[] = [];
  const others: Answer[] = [];
  for (let i = 0; i < RULE_ENTRIES; i++) {
    const mine = i >> 4 === view.seat;
    // A strike takes an entry of the opponent's half that does not have your colour yet.
    if (!mine && view.rule[i] !== view.seat) strikes.push([Action.STRIKE, i]);
    // A block restores an entry of your half that the opponent turned (one block per turn).
    if (mine && view.turn > 1 && !view.blocked && view.rule[i] !== view.seat) others.push([Action.BLOCK, i]);
  }
  if (view.turn > 1) {
    if (!view.meditated && view.health[view.seat] < view.health[other]) others.push([Action.MEDITATE, 0]);
    others.push([Action.PASS, 0]);
  }
  return [...strikes, ...others];
}

export const game: Game<View, Answer, Settings> = {
  name: "cata",
  makeView(m: Fields): View {
    const k = "tick";
    const health = ints(m, "health", k);
    const refused = isMap(m.refused)
      ? { tick: int(m.refused, "tick", "refused"), move: ints(m.refused, "move", "refused") as [number, number], reason: String(m.refused.reason ?? "") }
      : null;
    return {
      tick: int(m, "tick", k),
      budgetMs: int(m, "budget_ms", k),
      seat: int(m, "seat", k),
      size: int(m, "size", k),
      board: bin(m, "board", k),
      rule: ints(m, "rule", k),
      health: [health[0], health[1]],
      cellsPerHp: int(m, "cells_per_hp", k),
      turn: int(m, "turn", k),
      move: int(m, "move", k),
      movesLeft: int(m, "moves_left", k),
      blocked: bool(m, "blocked", k),
      meditated: bool(m, "meditated", k),
      opponentMeditated: bool(m, "opponent_meditated", k),
      refused,
      lastReaction: isMap(m.last_reaction) ? m.last_reaction : null,
      receivedAt: performance.now(),
    };
  },
  encodeAnswer(answer: Answer): number[] {
    if (!Array.isArray(answer) || answer.length !== 2 || !answer.every(isInt)) {
      throw new MovesError(`a C.A.T.A. answer is [code, index], two ints; got ${JSON.stringify(answer)}`);
    }
    const [code, entry] = answer;
    if (code < 0 || code > 3) throw new MovesError(`${code} is no move code (0 pass, 1 strike, 2 block, 3 meditate)`);
    if (entry < 0 || entry >= RULE_ENTRIES) throw new MovesError(`${entry} is no rule entry (0-31)`);
    return [code, entry];
  },
  idleAnswer(): Answer {
    return [Action.PASS, 0];
  },
  parseConfig(c: Fields): Settings {
    return {
      size: setting(c, "size", 64),
      maxTurns: setting(c, "max_turns", 0),
      maxGenerations: setting(c, "max_generations", 0),
      cellsPerHp: setting(c, "cells_per_hp", 0),
      startHealth: setting(c, "start_health", 0),
      torus: setting(c, "torus", true),
    };
  },
};

export type CataBot = Bot<View, Answer, Settings>;
