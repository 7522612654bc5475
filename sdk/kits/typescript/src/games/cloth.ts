// Cloth of Gold (docs/games/cloth.md): turn-based; each tick goes to the one seat placing now, which
// answers with 1 to maxUnits units [x, y] placed in order.

import type { Bot } from "../bot.js";
import { type Game, isInt, MovesError, setting } from "../game.js";
import { bin, bool, type Fields, int, ints, list } from "../protocol.js";

/** Cell codes: 0 empty, 1 a (seat 0), 2 b (seat 1), 3 c, 4 d. */
export const Cell = { EMPTY: 0, A: 1, B: 2, C: 3, D: 4 } as const;
/** Bits of a territory byte: a's, b's (3 = contested). */
export const TERRITORY_A = 1;
export const TERRITORY_B = 2;

/** The units to place, [x, y] each, in order. */
export type Answer = Array<[number, number]>;
/** A refusal of your previous batch: [index, x, y, reason] (x, y are -1 for malformed and empty). */
export type Rejected = [number, number, number, string];

export interface View {
  tick: number;
  budgetMs: number;
  round: number;
  /** Your cell code: 1 (a, seat 0) or 2 (b, seat 1). */
  you: number;
  width: number;
  height: number;
  /** width x height cell codes, row by row from the top: use `at(view.cells, view, x, y)`. */
  cells: Uint8Array;
  /** width x height bytes: bit 0 set in a's territory, bit 1 in b's. */
  territory: Uint8Array;
  /** Your first unit of the match is still to come (it need not be in your territory). */
  first: boolean;
  placesFirst: boolean;
  maxUnits: number;
  generations: number;
  /** a's and b's cell counts now. */
  units: [number, number];
  scores: [number, number];
  rejected: Rejected[];
  receivedAt: number;
}

export interface Settings {
  width: number;
  height: number;
  generations: number;
  maxRounds: number;
  maxUnits: number;
}

/** The byte of a width x height plane (cells, territory) at column `x`, row `y`. */
export function at(plane: Uint8Array, view: Pick<View, "width">, x: number, y: number): number {
  return plane[y * view.width + x];
}

/** Whether (x, y) is in your territory (the bit of your code). */
export function inTerritory(view: View, x: number, y: number): boolean {
  return (at(view.territory, view, x, y) & view.you) !== 0;
}

/** Whether a unit may go on (x, y) now, by the request's planes: the cell is empty, no opponent's cell is
 * among its 8 neighbours, it is not contested, and it is in your territory (unless `first`). A cell legal
 * now may stop being legal after your earlier units of the same batch; those come back in `rejected`. */
export function canPlace(view: View, x: number, y: number): boolean {
  if (x < 0 || y < 0 || x >= view.width || y >= view.height) return false;
  if (at(view.cells, view, x, y) !== Cell.EMPTY) return false;
  const them = view.you === Cell.A ? Cell.B : Cell.A;
  for (let dy = -1; dy <= 1; dy++) {
    for (let dx = -1; dx <= 1; dx++) {
      const nx = x + dx;
      const ny = y + dy;
      if (nx >= 0 && ny >= 0 && nx < view.width && ny < view.height && at(view.cells, view, nx, ny) === them) return false;
    }
  }
  const territory = at(view.territory, view, x, y);
  if (territory === (TERRITORY_A | TERRITORY_B)) return false;
  return view.first || (territory & view.you) !== 0;
}

export const game: Game<View, Answer, Settings> = {
  name: "cloth",
  makeView(m: Fields): View {
    const k = "tick";
    const units = ints(m, "units", k);
    const scores = ints(m, "scores", k);
    return {
      tick: int(m, "tick", k),
      budgetMs: int(m, "budget_ms", k),
      round: int(m, "round", k),
      you: int(m, "you", k),
      width: int(m, "width", k),
      height: int(m, "height", k),
      cells: bin(m, "cells", k),
      territory: bin(m, "territory", k),
      first: bool(m, "first", k),
      placesFirst: bool(m, "places_first", k),
      maxUnits: int(m, "max_units", k),
      generations: int(m, "generations", k),
      units: [units[0], units[1]],
      scores: [scores[0], scores[1]],
      rejected: list(m, "rejected", k) as Rejected[],
      receivedAt: performance.now(),
    };
  },
  encodeAnswer(answer: Answer, m: Fields): number[][] {
    const most = isInt(m.max_units) ? m.max_units : Infinity;
    if (!Array.isArray(answer)) throw new MovesError(`a Cloth of Gold answer is a list of [x, y], got ${JSON.stringify(answer)}`);
    if (answer.length > most) throw new MovesError(`${answer.length} units, but at most ${most} may be placed this turn`);
    for (const unit of answer) {
      if (!Array.isArray(unit) || unit.length !== 2 || !unit.every(isInt)) {
        throw new MovesError(`a unit is [x, y], two ints; got ${JSON.stringify(unit)}`);
      }
    }
    return answer.map(([x, y]) => [x, y]);
  },
  idleAnswer(): Answer {
    return [];
  },
  parseConfig(c: Fields): Settings {
    return {
      width: setting(c, "width", 0),
      height: setting(c, "height", 0),
      generations: setting(c, "generations", 0),
      maxRounds: setting(c, "max_rounds", 0),
      maxUnits: setting(c, "max_units", 0),
    };
  },
};

export type ClothBot = Bot<View, Answer, Settings>;
