import type { CardFingerprint } from '@retain/domain';
import type { DataSource, EntityManager } from 'typeorm';

/**
 * The fingerprint to store for each card, given its candidates (cardFingerprintCandidates: the
 * current key first, then older keys and the legacy derivation): the first candidate some
 * transaction of this merchant already carries, else the current one. A card thus keeps the
 * fingerprint it was first stored under, and its network-limit history and blocks (kept per
 * merchant, matched on card_hmac) survive any key rotation without rewriting old rows. One query
 * for the whole batch; `null` for a card without candidates.
 */
export async function settleCardFingerprints(
  m: EntityManager | DataSource,
  merchantId: string,
  cards: readonly (readonly CardFingerprint[])[],
): Promise<(CardFingerprint | null)[]> {
  const values = [...new Set(cards.flatMap((c) => c.map((f) => f.value)))];
  const known = new Set<string>();
  if (cards.some((c) => c.length > 1)) {
    // One index-only probe of (card_hmac, merchant_id) per fingerprint, whatever the statistics say
    // (migration KeyLedLookups); bpchar[] compares as the column's type.
    const rows: { card_hmac: string }[] = await m.query(
      `SELECT card_hmac FROM retain_known_fingerprints($1::uuid, $2::bpchar[])`,
      [merchantId, values],
    );
    for (const r of rows) known.add(r.card_hmac);
  }
  return cards.map((c) => c.find((f) => known.has(f.value)) ?? c[0] ?? null);
}
