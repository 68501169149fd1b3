import { DateTime, IANAZone } from 'luxon';

/**
 * An IANA zone that remembers its UTC offsets per minute (a zone's offset only changes on a whole
 * minute). Planning an attempt asks luxon for the same zone's offsets thousands of times (every
 * candidate slot, every local day), and each answer was an Intl formatting: a tenth of the retry
 * worker's CPU. Same answers, computed once.
 */
class MemoZone extends IANAZone {
  private readonly offsets = new Map<number, number>();

  override offset(ts: number): number {
    const minute = Math.floor(ts / 60_000);
    let value = this.offsets.get(minute);
    if (value === undefined) {
      value = super.offset(ts);
      if (this.offsets.size >= 20_000) this.offsets.clear();
      this.offsets.set(minute, value);
    }
    return value;
  }
}

const zones = new Map<string, MemoZone | string>();

/** The zone to hand luxon for an IANA name: a MemoZone, or the name itself when it is not a valid zone. */
export function cachedZone(name: string): IANAZone | string {
  let zone = zones.get(name);
  if (zone === undefined) {
    const z = new MemoZone(name);
    zone = z.isValid ? z : name;
    if (zones.size < 1_000) zones.set(name, zone);
  }
  return zone;
}

const known = new Map<string, boolean>();

/** Whether luxon takes the zone (`DateTime.setZone(name).isValid`), remembered per name. */
export function isKnownZone(name: string): boolean {
  let ok = known.get(name);
  if (ok === undefined) {
    ok = typeof cachedZone(name) !== 'string' || DateTime.now().setZone(name).isValid;
    if (known.size < 1_000) known.set(name, ok);
  }
  return ok;
}
