// What a bot draws for its own eyes each tick: `debug.mark`, `debug.line`, `debug.log`, sent as the
// optional `debug` map of that tick's answer (docs/protocol.md#debug-drawing), kept in the replay and
// drawn by the web player. It mirrors the Python SDK's DebugLayer (sdk/debug.py), caps included.
//
// Forgiving on purpose: drawing is for debugging, so a bad call (a colour that is no colour, a cell that
// is no cell) or one past the caps is dropped and counted, never thrown, and never costs the move.

/** Marks kept of one answer (the server's cap: more would be dropped there). */
export const MAX_MARKS = 256;
/** Lines kept of one answer. */
export const MAX_LINES = 64;
/** Bytes of text (UTF-8, all lines together) kept of one answer. */
export const MAX_TEXT_BYTES = 1024;
/** Characters of a mark's label; a longer label is cut to this. */
export const MAX_LABEL = 16;

/** Colour names `Debug` takes besides `#rrggbb` (the Python SDK's). */
export const COLOURS: Readonly<Record<string, string>> = {
  red: "#e6194b",
  green: "#3cb44b",
  blue: "#4363d8",
  yellow: "#ffe119",
  orange: "#f58231",
  purple: "#911eb4",
  cyan: "#42d4f4",
  magenta: "#f032e6",
  white: "#ffffff",
  black: "#000000",
  grey: "#a9a9a9",
};

/** A cell: board `[x, y]`, or in Rezzo `[row, col]` of an agent's viewport (row 12, col 6 is the agent). */
export type DebugCell = readonly [number, number];

export interface DebugMark {
  cell: [number, number];
  colour: string;
  label?: string;
  agent?: number;
}

export interface DebugLine {
  from: [number, number];
  to: [number, number];
  colour: string;
  agent?: number;
}

/** The `debug` map of one answer. */
export interface DebugMap {
  marks?: DebugMark[];
  lines?: DebugLine[];
  text?: string[];
}

const LIMIT = 2 ** 31;
// Printable: no control characters (C0, DEL, C1), as Python's str.isprintable for what bots write.
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f]/g;
const HAS_UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f]/;

function asColour(value: unknown): string | undefined {
  if (typeof value !== "string") return undefined;
  if (/^#[0-9a-fA-F]{6}$/.test(value)) return value.toLowerCase();
  return COLOURS[value.toLowerCase()];
}

function asCell(value: unknown): [number, number] | undefined {
  if (!Array.isArray(value) || value.length !== 2) return undefined;
  const [a, b] = value as unknown[];
  const ok = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v) && v >= -LIMIT && v < LIMIT;
  return ok(a) && ok(b) ? [a, b] : undefined;
}

function asAgent(value: unknown): [boolean, number | undefined] {
  if (value === undefined) return [true, undefined];
  return typeof value === "number" && Number.isInteger(value) ? [true, value] : [false, undefined];
}

/** One tick's drawing, handed to `onTick(view, debug)`. `dropped` counts calls dropped over the match
 * (malformed, or past a cap) and `firstProblem` says what was wrong with the first; the loop reports
 * both once. */
export class Debug {
  private marks: DebugMark[] = [];
  private lines: DebugLine[] = [];
  private text: string[] = [];
  private textRoom = MAX_TEXT_BYTES;
  dropped = 0;
  firstProblem: string | undefined;

  private drop(why: string): void {
    this.dropped += 1;
    this.firstProblem ??= why;
  }

  /** Mark `cell` in `colour` (`#rrggbb` or a name of `COLOURS`), with an optional label of up to 16
   * characters (cut beyond); in Rezzo `agent` names whose viewport the cell is in (default: the
   * tick's first agent). */
  mark(cell: DebugCell, colour: string, label?: string, agent?: number): void {
    if (this.marks.length >= MAX_MARKS) return this.drop(`more than ${MAX_MARKS} marks in one tick`);
    const where = asCell(cell);
    const col = asColour(colour);
    const [agentOk, who] = asAgent(agent);
    if (where === undefined || col === undefined || !agentOk) {
      return this.drop(`mark(${JSON.stringify(cell)}, ${JSON.stringify(colour)}): a cell is two ints, a colour #rrggbb or a name, an agent an int`);
    }
    const mark: DebugMark = { cell: where, colour: col };
    if (label !== undefined) {
      if (typeof label !== "string" || HAS_UNPRINTABLE.test(label)) {
        return this.drop(`mark label ${JSON.stringify(label)}: a label is printable text`);
      }
      if (label) mark.label = Array.from(label).slice(0, MAX_LABEL).join("");
    }
    if (who !== undefined) mark.agent = who;
    this.marks.push(mark);
  }

  /** A line from cell `a` to cell `b` in `colour`. */
  line(a: DebugCell, b: DebugCell, colour: string, agent?: number): void {
    if (this.lines.length >= MAX_LINES) return this.drop(`more than ${MAX_LINES} lines in one tick`);
    const from = asCell(a);
    const to = asCell(b);
    const col = asColour(colour);
    const [agentOk, who] = asAgent(agent);
    if (from === undefined || to === undefined || col === undefined || !agentOk) {
      return this.drop(`line(${JSON.stringify(a)}, ${JSON.stringify(b)}, ${JSON.stringify(colour)}): cells are two ints, a colour #rrggbb`);
    }
    const line: DebugLine = { from, to, colour: col };
    if (who !== undefined) line.agent = who;
    this.lines.push(line);
  }

  /** One or more text lines (split at newlines) for this tick's panel; 1 KiB a tick in all. */
  log(text: unknown): void {
    const pieces = String(text).split(/\r\n|\r|\n/);
    for (const raw of pieces) {
      const piece = raw.replace(UNPRINTABLE, " ");
      const size = Buffer.byteLength(piece, "utf8");
      if (size > this.textRoom) {
        this.drop(`more than ${MAX_TEXT_BYTES} bytes of text in one tick`);
        continue;
      }
      this.textRoom -= size;
      this.text.push(piece);
    }
  }

  /** Whether anything was drawn this tick. */
  get empty(): boolean {
    return !this.marks.length && !this.lines.length && !this.text.length;
  }

  /** This tick's `debug` map (undefined: nothing drawn), and a clean drawing for the next tick. */
  take(): DebugMap | undefined {
    if (this.empty) return undefined;
    const out: DebugMap = {};
    if (this.marks.length) [out.marks, this.marks] = [this.marks, []];
    if (this.lines.length) [out.lines, this.lines] = [this.lines, []];
    if (this.text.length) [out.text, this.text] = [this.text, []];
    this.textRoom = MAX_TEXT_BYTES;
    return out;
  }

  /** Forget this tick's drawing (the loop calls it before each `onTick`). */
  clear(): void {
    this.take();
  }
}
