/**
 * Cheap brute-force brake for `POST /retain/session`: failed logins are counted per key (the caller
 * chooses: login + address, address alone) in this process; past a key's limit within the window,
 * further attempts are refused (429) until the window has passed. A try is counted when it starts
 * (acquire), in the same synchronous step as the check, so concurrent tries cannot all pass the
 * check before any failure is counted; a success clears its login key and gives back the count it
 * took from the others. API keys are 240-bit random, so this guards against noise and log flooding
 * more than against guessing; per-process memory is enough for that (each replica brakes on its own).
 */
export type ThrottleKeys = readonly (readonly [key: string, limit: number])[];

/** Entries kept at most (bounded memory under a flood of distinct keys). */
const MAX_ENTRIES = 100_000;

export class LoginThrottle {
  private readonly failures = new Map<string, { count: number; since: number }>();

  constructor(
    private readonly windowMs = 15 * 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** Seconds to wait when any of the keys is at its limit, else 0. */
  retryAfter(keys: ThrottleKeys): number {
    const t = this.now();
    let wait = 0;
    for (const [key, limit] of keys) {
      const f = this.failures.get(key);
      if (!f) continue;
      if (t - f.since >= this.windowMs) {
        this.failures.delete(key);
        continue;
      }
      if (f.count >= limit) wait = Math.max(wait, Math.ceil((f.since + this.windowMs - t) / 1000));
    }
    return wait;
  }

  /**
   * Starts a try: seconds to wait when a key is at its limit (nothing counted), else 0 and the try is
   * counted as a failure against every key until `succeeded` or `release` says otherwise.
   */
  acquire(keys: ThrottleKeys): number {
    const wait = this.retryAfter(keys);
    if (wait > 0) return wait;
    this.failed(keys);
    return 0;
  }

  failed(keys: ThrottleKeys): void {
    const t = this.now();
    if (this.failures.size >= MAX_ENTRIES) this.prune(t);
    for (const [key] of keys) {
      const f = this.failures.get(key);
      if (!f || t - f.since >= this.windowMs) this.failures.set(key, { count: 1, since: t });
      else f.count += 1;
    }
  }

  /** The try had the right credentials: its login key (the first) is cleared, the others given back. */
  succeeded(keys: ThrottleKeys): void {
    const [first, ...rest] = keys;
    if (first) this.failures.delete(first[0]);
    this.release(rest);
  }

  /** Gives back the count a try took (it was not a failed login). */
  release(keys: ThrottleKeys): void {
    for (const [key] of keys) {
      const f = this.failures.get(key);
      if (f && f.count > 0) f.count -= 1;
    }
  }

  /** Drops expired entries, then the oldest tenth if still full (never everyone's counts at once). */
  private prune(t: number): void {
    for (const [key, f] of this.failures) if (t - f.since >= this.windowMs) this.failures.delete(key);
    if (this.failures.size < MAX_ENTRIES) return;
    let drop = Math.ceil(MAX_ENTRIES / 10);
    for (const key of this.failures.keys()) {
      if (drop-- <= 0) break;
      this.failures.delete(key);
    }
  }
}
