// What the test bots say on stderr, one JSON line each, for the tests to read from the bot's log: the
// welcome's settings, the first view's shape, the end.

import type { MatchInfo, MatchResult } from "../../src/index.js";

export function report(what: string, value: unknown): void {
  // Byte planes as their length: a Buffer's toJSON has already run when a replacer sees it.
  const json = JSON.stringify(value, function (this: Record<string, unknown>, key: string, v: unknown) {
    return this[key] instanceof Uint8Array ? { bytes: (this[key] as Uint8Array).length } : v;
  });
  process.stderr.write(`REPORT ${what} ${json}\n`);
}

/** The hooks every test bot shares: the first view, the settings and the end, reported. */
export class Reporting {
  private first = true;

  onStart(info: MatchInfo<unknown>): void {
    report("start", { seat: info.seat, settings: info.settings });
  }

  onEnd(result: MatchResult): void {
    report("end", result);
  }

  firstView(view: unknown): void {
    if (this.first) report("view", view);
    this.first = false;
  }
}
