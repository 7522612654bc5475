// Colorblocks (docs/games/colorblocks.md): turn-based; each tick goes to the seat to move, which answers
// with a list of actions carried out in order, each a list that starts with its name.

import type { Bot } from "../bot.js";
import { type Game, isInt, MovesError, setting } from "../game.js";
import { bin, type Fields, int, ints, list } from "../protocol.js";

/** Block codes of the board. */
export const Block = {
  NEUTRAL: 0,
  RED: 1,
  BLUE: 2,
  TRUE_NEUTRAL: 3,
  DEAD: 4,
  RED_OBJECTIVE: 5,
  BLUE_OBJECTIVE: 6,
  RED_SPAWN: 7,
  BLUE_SPAWN: 8,
} as const;
export const KINDS = ["fighter", "paver", "cleaner", "shooter", "shield"] as const;
export type UnitKind = (typeof KINDS)[number];
export const MAX_ACTIONS = 64;

export type Action =
  | ["place", number, number]
  | ["move", number, number, number]
  | ["move", number, number, number, "dead"]
  | ["act", number, number, number]
  | ["destruct", number]
  | ["guard", number, number]
  | ["guard", number, number, number, number]
  | ["spawn", UnitKind];
/** The actions of a turn, in order; [] passes. */
export type Answer = Action[];

export interface Unit {
  id: number;
  owner: number;
  kind: string;
  x: number;
  y: number;
}

export interface View {
  tick: number;
  budgetMs: number;
  /** Your seat: 0 red (moves first), 1 blue. */
  seat: number;
  turn: number;
  maxTurns: number;
  width: number;
  height: number;
  /** width x height block codes, row by row from the top: use `at(view, x, y)`. */
  board: Uint8Array;
  /** [owner, x, y] per guard. */
  guards: Array<[number, number, number]>;
  units: Unit[];
  /** Guards in reserve, per seat. */
  reserves: number[];
  /** The kind each seat's spawn makes next. */
  nextSpawn: string[];
  /** [index, reason] per action of your previous turn that did nothing (index -1: the whole answer). */
  refused: Array<[number, string]>;
  receivedAt: number;
}

export interface Settings {
  map: string;
  width: number;
  height: number;
  maxTurns: number;
  guards: number;
}

export function at(view: Pick<View, "board" | "width">, x: number, y: number): number {
  return view.board[y * view.width + x];
}

/** How many blocks a colour block of yours placed on (x, y) would convert now (docs/games/colorblocks.md,
 * "Colour change"); 0 where a placement is not allowed (not neutral nor yours, a unit or guard there) or
 * would convert nothing, which the rules refuse. */
export function converts(view: View, x: number, y: number): number {
  const mine = view.seat === 0 ? Block.RED : Block.BLUE;
  const theirs = view.seat === 0 ? Block.BLUE : Block.RED;
  const here = at(view, x, y);
  if (here !== Block.NEUTRAL && here !== mine) return 0;
  const taken = (cx: number, cy: number): boolean => view.guards.some(([, gx, gy]) => gx === cx && gy === cy);
  if (taken(x, y) || view.units.some((u) => u.x === x && u.y === y)) return 0;
  let total = 0;
  for (const [dx, dy] of [[1, 0], [-1, 0], [0, 1], [0, -1]]) {
    let collected = 0;
    for (let cx = x + dx, cy = y + dy; cx >= 0 && cy >= 0 && cx < view.width && cy < view.height; cx += dx, cy += dy) {
      const block = at(view, cx, cy);
      if (taken(cx, cy)) break;
      if (block === Block.NEUTRAL || block === theirs) {
        collected += 1;
        continue;
      }
      if (block === mine) total += collected;
      break;
    }
  }
  return total;
}

const SHAPES: Record<string, number[]> = { place: [3], move: [4, 5], act: [4], destruct: [2], guard: [3, 5], spawn: [2] };

export const game: Game<View, Answer, Settings> = {
  name: "colorblocks",
  makeView(m: Fields): View {
    const k = "tick";
    const units = list(m, "units", k).map((u) => {
      const [id, owner, kind, x, y] = u as [number, number, string, number, number];
      return { id, owner, kind, x, y };
    });
    return {
      tick: int(m, "tick", k),
      budgetMs: int(m, "budget_ms", k),
      seat: int(m, "seat", k),
      turn: int(m, "turn", k),
      maxTurns: int(m, "max_turns", k),
      width: int(m, "width", k),
      height: int(m, "height", k),
      board: bin(m, "board", k),
      guards: list(m, "guards", k) as Array<[number, number, number]>,
      units,
      reserves: ints(m, "reserves", k),
      nextSpawn: list(m, "next_spawn", k).map(String),
      refused: list(m, "refused", k) as Array<[number, string]>,
      receivedAt: performance.now(),
    };
  },
  encodeAnswer(answer: Answer): Action[] {
    if (!Array.isArray(answer)) throw new MovesError(`a Colorblocks answer is a list of actions, got ${JSON.stringify(answer)}`);
    if (answer.length > MAX_ACTIONS) throw new MovesError(`${answer.length} actions, at most ${MAX_ACTIONS}`);
    for (const action of answer) {
      const lengths = Array.isArray(action) ? SHAPES[String(action[0])] : undefined;
      if (!Array.isArray(action) || lengths === undefined || !lengths.includes(action.length)) {
        throw new MovesError(`${JSON.stringify(action)} is no action: see docs/protocol.md, Colorblocks`);
      }
    }
    return answer;
  },
  idleAnswer(): Answer {
    return [];
  },
  parseConfig(c: Fields): Settings {
    return {
      map: setting(c, "map", ""),
      width: setting(c, "width", 0),
      height: setting(c, "height", 0),
      maxTurns: setting(c, "max_turns", 0),
      guards: setting(c, "guards", 0),
    };
  },
};

export type ColorblocksBot = Bot<View, Answer, Settings>;
