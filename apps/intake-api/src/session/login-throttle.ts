/**
 * Cheap brute-force brake for `POST /retain/session`: failed logins are counted per key (the caller
 * chooses: login + address, address alone) in this process; past a key's limit within the window,
 * further attempts are refused (429) until the window has passed. A success clears its key. API keys
 * are 240-bit random, so this guards against noise and log flooding more than against guessing;
 * per-process memory is enough for that (each replica brakes on its own).
 */
export class LoginThrottle {
  private readonly failures = new Map<string, { count: number; since: number }>();

  constructor(
    private readonly windowMs = 15 * 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** Seconds to wait when any of the keys is at its limit, else 0. */
  retryAfter(keys: readonly (readonly [key: string, limit: number])[]): number {
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

  failed(keys: readonly (readonly [key: string, limit: number])[]): void {
    const t = this.now();
    if (this.failures.size > 100_000) this.failures.clear(); // bounded memory under a flood
    for (const [key] of keys) {
      const f = this.failures.get(key);
      if (!f || t - f.since >= this.windowMs) this.failures.set(key, { count: 1, since: t });
      else f.count += 1;
    }
  }

  succeeded(key: string): void {
    this.failures.delete(key);
  }
}
