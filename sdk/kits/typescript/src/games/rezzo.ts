// Rezzo (docs/games/rezzo.md): real time, every seat gets a tick each tick. A tick shows each of your
// live agents a 13x13 viewport of cell codes and damage; the answer is one move code per agent.

import type { Bot } from "../bot.js";
import { type Game, isInt, MovesError, setting } from "../game.js";
import { bin, type Fields, int, ints, ProtocolError } from "../protocol.js";

export const VIEW_SIZE = 13;
export const VIEW_CELLS = VIEW_SIZE * VIEW_SIZE;
/** Row and column of the viewing agent inside its viewport (bottom centre). */
export const VIEW_AGENT_ROW = 12;
export const VIEW_AGENT_COL = 6;
export const MAX_DAMAGE = 3;
export const OWNER_MASK = 0x07;
export const KIND_MASK = 0xf8;

/** Cell states. Owned kinds (AGENT, FLAG, GEYSER, BASE) are added to an owner 0..7; 0 is always you. */
export const Cell = {
  BLANK: 0,
  CONDUCTOR: 1,
  ELECTRON: 2,
  TAIL: 3,
  PHOTON: 4,
  /** Outside the world: only ever seen in viewports. */
  OOB: 7,
  AGENT: 8,
  FLAG: 16,
  GEYSER: 24,
  BASE: 32,
} as const;

/** An agent's move for one tick; anything else, or no answer, is NOOP. */
export const Move = { NOOP: 0, ADVANCE: 1, LEFT: 2, RIGHT: 3, BUILD: 4, HIT: 5 } as const;
export type Move = (typeof Move)[keyof typeof Move];

/** The state without its owner (a Cell value). */
export function kind(code: number): number {
  return code < Cell.AGENT ? code : code & KIND_MASK;
}

/** The owner of an owned state (0 is you), else undefined. */
export function owner(code: number): number | undefined {
  return code >= Cell.AGENT ? code & OWNER_MASK : undefined;
}

export function isWire(code: number): boolean {
  return code === Cell.CONDUCTOR || code === Cell.ELECTRON || code === Cell.TAIL;
}

/** What one agent sees: 13x13 cell codes and damage values, the agent at the bottom centre.
 *
 * `cell(row, col)` is the wire layout: row 0 is farthest ahead, the agent is at row 12, column 6.
 * `at(forward, right)` is relative to the agent: `at(0, 0)` the agent, `at(1, 0)` the cell in front of
 * it (= `ahead()`), `at(2, -1)` two ahead and one to the left; forward 0..12, right -6..6. */
export class Viewport {
  constructor(
    readonly cells: Uint8Array,
    readonly damage: Uint8Array = new Uint8Array(VIEW_CELLS),
  ) {
    if (cells.length !== VIEW_CELLS || damage.length !== VIEW_CELLS) {
      throw new RangeError(`a viewport needs ${VIEW_CELLS} cells and damage values, got ${cells.length} and ${damage.length}`);
    }
  }

  static inView(forward: number, right: number): boolean {
    return forward >= 0 && forward <= VIEW_AGENT_ROW && right >= -VIEW_AGENT_COL && right <= VIEW_AGENT_COL;
  }

  cell(row: number, col: number): number {
    return this.cells[index(row, col)];
  }

  cellDamage(row: number, col: number): number {
    return this.damage[index(row, col)];
  }

  at(forward: number, right = 0): number {
    return this.cell(...rowCol(forward, right));
  }

  damageAt(forward: number, right = 0): number {
    return this.cellDamage(...rowCol(forward, right));
  }

  /** The code `n` cells straight ahead; `ahead()` is the cell a move acts on. */
  ahead(n = 1): number {
    return this.at(n, 0);
  }

  /** Whether ADVANCE or BUILD would be legal now (the cell ahead is blank). */
  canAdvance(): boolean {
    return this.ahead() === Cell.BLANK;
  }

  /** Whether HIT would be legal now (wire or a flag ahead). */
  canHit(): boolean {
    const k = kind(this.ahead());
    return isWire(k) || k === Cell.FLAG;
  }

  /** [forward, right] of every cell of `cellKind` in sight, nearest first; `mine` filters owned kinds. */
  find(cellKind: number, mine?: boolean): Array<[number, number]> {
    const found: Array<[number, number, number]> = [];
    for (let row = 0; row < VIEW_SIZE; row++) {
      for (let col = 0; col < VIEW_SIZE; col++) {
        const code = this.cells[row * VIEW_SIZE + col];
        if (kind(code) !== cellKind) continue;
        if (mine !== undefined && (owner(code) === 0) !== mine) continue;
        const forward = VIEW_AGENT_ROW - row;
        const right = col - VIEW_AGENT_COL;
        found.push([forward, right, forward + Math.abs(right)]);
      }
    }
    found.sort((a, b) => a[2] - b[2] || a[0] - b[0] || a[1] - b[1]);
    return found.map(([f, r]) => [f, r]);
  }
}

function index(row: number, col: number): number {
  if (!(row >= 0 && row < VIEW_SIZE && col >= 0 && col < VIEW_SIZE)) {
    throw new RangeError(`viewport row ${row}, column ${col} is outside 0..${VIEW_SIZE - 1}`);
  }
  return row * VIEW_SIZE + col;
}

function rowCol(forward: number, right: number): [number, number] {
  if (!Viewport.inView(forward, right)) {
    throw new RangeError(`(forward ${forward}, right ${right}) is outside the window: forward 0..12, right -6..6`);
  }
  return [VIEW_AGENT_ROW - forward, VIEW_AGENT_COL + right];
}

/** One tick's request. `viewports[i]` is what agent `agents[i]` sees; answer in that order. */
export interface View {
  tick: number;
  budgetMs: number;
  /** Your live agents' indices, ascending. */
  agents: number[];
  viewports: Viewport[];
  /** When the request was read (performance.now()), for timeLeftMs. */
  receivedAt: number;
}

/** One move per entry of `view.agents`, in that order, or a single move when the seat has one agent. */
export type Answer = number | number[];

export interface Settings {
  /** The map's display name. */
  map: string;
  width: number;
  height: number;
  agentsPerPlayer: number;
  viewSize: number;
  maxTicks: number;
  torus: boolean;
  ownBaseCounts: boolean;
}

/** Milliseconds of the budget left, measured from when the request was read. */
export function timeLeftMs(view: { budgetMs: number; receivedAt: number }): number {
  return view.budgetMs - (performance.now() - view.receivedAt);
}

export const game: Game<View, Answer, Settings> = {
  name: "rezzo",
  makeView(m: Fields): View {
    const agents = ints(m, "agents", "tick");
    const cells = bin(m, "cells", "tick");
    const damage = bin(m, "damage", "tick");
    const size = VIEW_CELLS * agents.length;
    for (const [key, plane] of [["cells", cells], ["damage", damage]] as const) {
      if (plane.length !== size) {
        throw new ProtocolError("bad_message", `tick: the field '${key}' must hold ${size} bytes for ${agents.length} agents, got ${plane.length}`);
      }
    }
    const viewports = agents.map(
      (_, i) => new Viewport(cells.slice(i * VIEW_CELLS, (i + 1) * VIEW_CELLS), damage.slice(i * VIEW_CELLS, (i + 1) * VIEW_CELLS)),
    );
    return { tick: int(m, "tick", "tick"), budgetMs: int(m, "budget_ms", "tick"), agents, viewports, receivedAt: performance.now() };
  },
  encodeAnswer(answer: Answer, m: Fields): number[] {
    const count = Array.isArray(m.agents) ? m.agents.length : 0;
    const moves = typeof answer === "number" && count === 1 ? [answer] : answer;
    if (!Array.isArray(moves)) {
      throw new MovesError(`a Rezzo answer is one move per agent (${count} agents), got ${JSON.stringify(answer)}`);
    }
    if (moves.length !== count) throw new MovesError(`${moves.length} moves for ${count} agents: give one per agent`);
    for (const move of moves) {
      if (!isInt(move) || move < Move.NOOP || move > Move.HIT) throw new MovesError(`${JSON.stringify(move)} is no move code (0-5)`);
    }
    return moves;
  },
  idleAnswer(view: View): number[] {
    return view.agents.map(() => Move.NOOP);
  },
  parseConfig(c: Fields): Settings {
    return {
      map: setting(c, "map", ""),
      width: setting(c, "width", 0),
      height: setting(c, "height", 0),
      agentsPerPlayer: setting(c, "agents_per_player", 1),
      viewSize: setting(c, "view_size", VIEW_SIZE),
      maxTicks: setting(c, "max_ticks", 0),
      torus: setting(c, "torus", false),
      ownBaseCounts: setting(c, "own_base_counts", true),
    };
  },
};

/** A Rezzo bot: `onTick(view)` returns one move per agent (`class MyBot implements RezzoBot`). */
export type RezzoBot = Bot<View, Answer, Settings>;
