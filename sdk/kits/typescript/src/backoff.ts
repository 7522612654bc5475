// How long a bot that keeps playing waits before it connects again: exponential back-off with jitter
// (docs/protocol.md, "Joining a ladder"; the Python SDK's cellarena.sdk.reconnect does the same).
//
// The n-th failure in a row waits a random time between half of and the whole of
// min(cap, first * 2^(n-1)) seconds: 0.5-1 s, then 1-2 s, 2-4 s, ... up to 30-60 s. The jitter keeps bots
// that were all turned away at once (a ladder restarting) from all coming back at once. A match played to
// its end starts the count again.

/** The longest wait of the first round, in seconds. */
export const FIRST_S = 1;
/** No wait is longer, unless the server's refusal says how long it lasts. */
export const CAP_S = 60;
// A ladder's locked_out message says how long: "... refused for another 42 s".
const WAIT_HINT = /for (?:another )?(\d+(?:\.\d+)?) ?s\b/;

export class Backoff {
  failures = 0;

  constructor(
    readonly first: number = FIRST_S,
    readonly cap: number = CAP_S,
    private readonly random: () => number = Math.random,
  ) {
    if (!(first > 0 && first <= cap)) throw new RangeError(`the back-off needs 0 < first <= cap, got ${first}, ${cap}`);
  }

  /** Seconds to wait after one more failure; at least what a refusal's message names ("for another 42 s"),
   * even past the cap, since coming back sooner would only be refused again. */
  next(serverMessage = ""): number {
    this.failures += 1;
    const ceiling = Math.min(this.cap, this.first * 2 ** Math.min(this.failures - 1, 32));
    let wait = ceiling / 2 + this.random() * (ceiling / 2);
    const hint = WAIT_HINT.exec(serverMessage);
    if (hint) wait = Math.max(wait, Number(hint[1]) + this.random());
    return wait;
  }

  /** A match was played: the next failure waits the shortest time again. */
  reset(): void {
    this.failures = 0;
  }
}
