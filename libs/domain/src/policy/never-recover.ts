/**
 * Response codes that retrying does not fix, though the networks do not forbid a retry (so the
 * classifier calls them soft): the request itself is wrong or the card may not be used for it.
 * The adaptive policy stops on them at once instead of spending its budget (issue 11 found ~6
 * attempts spent on each `13` and `62`). Network categories stay in decline-classifier.ts.
 */
import { normalizeCode } from './network-rules.config';

export const NEVER_RECOVER_CODES: Readonly<Record<string, string>> = {
  '03': 'invalid merchant',
  '12': 'invalid transaction',
  '13': 'invalid amount',
  '30': 'format error',
  '57': 'transaction not permitted to cardholder',
  '58': 'transaction not permitted to terminal',
  '62': 'restricted card',
  '93': 'transaction cannot be completed, violation of law',
  R0: 'stop payment order',
  R1: 'revocation of authorization',
  R3: 'revocation of all authorizations',
};

/** Why retrying this response code is pointless, or null when a retry may recover it. */
export function neverRecovers(responseCode: string | null | undefined): string | null {
  const code = normalizeCode(responseCode);
  const what = NEVER_RECOVER_CODES[code];
  return what ? `response ${code} (${what}): a retry does not change the answer` : null;
}
