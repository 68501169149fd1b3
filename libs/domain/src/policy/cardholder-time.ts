/**
 * Cardholder-local time: the time zone a cardholder most likely lives in, from what a merchant
 * submits. Attempts are planned at local hours (money posts overnight, local morning), so the zone
 * matters more than the country: the US spans six zones, Brazil four, Russia eleven.
 *
 * Order of evidence (first that answers wins):
 *   1. billing address country + postal code (a small prefix table for the multi-zone countries
 *      US, CA, AU, BR, MX, RU; one zone for the rest);
 *   2. billing address country alone (its most populous zone);
 *   3. the card's BIN country (where the issuer is: usually where the cardholder lives);
 *   4. the merchant's country, when the caller knows it;
 *   5. DEFAULT_CARDHOLDER_TIME_ZONE, America/New_York: most card-not-present subscription volume is
 *      North American, and 07:00-09:00 there is midday in Europe, after overnight deposits posted
 *      on both sides of the Atlantic. UTC would put every attempt in the American night.
 * Zones come from countries-and-timezones (country -> IANA zones); zone math is luxon's.
 */
import { getCountry } from 'countries-and-timezones';
import { isKnownZone } from './zone-cache';

export const DEFAULT_CARDHOLDER_TIME_ZONE = 'America/New_York';

export type TimeZoneSource = 'postal-code' | 'billing-country' | 'bin-country' | 'merchant-country' | 'default';

export interface TimeZoneChoice {
  timeZone: string;
  source: TimeZoneSource;
}

export interface TimeZoneEvidence {
  cardholder?: { country?: string | null; postalCode?: string | null } | null;
  card?: { binCountry?: string | null } | null;
  merchantCountry?: string | null;
  /** Zone used when nothing else answers (default DEFAULT_CARDHOLDER_TIME_ZONE). */
  fallback?: string;
}

/** Most populous zone of each country that countries-and-timezones lists with several zones. */
const PRIMARY_ZONE: Readonly<Record<string, string>> = {
  AR: 'America/Argentina/Buenos_Aires',
  AU: 'Australia/Sydney',
  BR: 'America/Sao_Paulo',
  CA: 'America/Toronto',
  CD: 'Africa/Kinshasa',
  CL: 'America/Santiago',
  CN: 'Asia/Shanghai',
  CY: 'Asia/Nicosia',
  DE: 'Europe/Berlin',
  EC: 'America/Guayaquil',
  ES: 'Europe/Madrid',
  FM: 'Pacific/Pohnpei',
  GL: 'America/Nuuk',
  ID: 'Asia/Jakarta',
  KI: 'Pacific/Tarawa',
  KZ: 'Asia/Almaty',
  MH: 'Pacific/Majuro',
  MN: 'Asia/Ulaanbaatar',
  MX: 'America/Mexico_City',
  MY: 'Asia/Kuala_Lumpur',
  NZ: 'Pacific/Auckland',
  PF: 'Pacific/Tahiti',
  PG: 'Pacific/Port_Moresby',
  PS: 'Asia/Hebron',
  PT: 'Europe/Lisbon',
  RU: 'Europe/Moscow',
  UA: 'Europe/Kyiv',
  US: 'America/New_York',
  UZ: 'Asia/Tashkent',
  VN: 'Asia/Ho_Chi_Minh',
};

type PrefixTable = readonly (readonly [from: string, to: string, zone: string])[];

/** US ZIP codes by 3-digit prefix range (ranges not listed: America/New_York). */
const US_ZIP3: PrefixTable = [
  ['006', '009', 'America/Puerto_Rico'],
  ['324', '325', 'America/Chicago'], // Florida panhandle
  ['350', '372', 'America/Chicago'], // Alabama, middle Tennessee
  ['380', '397', 'America/Chicago'], // west Tennessee, Mississippi
  ['420', '427', 'America/Chicago'], // western Kentucky
  ['460', '479', 'America/Indiana/Indianapolis'],
  ['500', '588', 'America/Chicago'], // Iowa, Wisconsin, Minnesota, Dakotas
  ['590', '599', 'America/Denver'], // Montana
  ['600', '797', 'America/Chicago'], // Illinois .. Texas
  ['798', '799', 'America/Denver'], // El Paso
  ['800', '831', 'America/Denver'], // Colorado, Wyoming
  ['832', '838', 'America/Boise'],
  ['840', '847', 'America/Denver'], // Utah
  ['850', '865', 'America/Phoenix'], // Arizona (no DST)
  ['870', '885', 'America/Denver'], // New Mexico; 885: El Paso
  ['889', '961', 'America/Los_Angeles'], // Nevada, California
  ['967', '968', 'Pacific/Honolulu'],
  ['969', '969', 'Pacific/Guam'],
  ['970', '994', 'America/Los_Angeles'], // Oregon, Washington
  ['995', '999', 'America/Anchorage'],
];

/** Canadian postal codes by first letter (the province). */
const CA_LETTER: Readonly<Record<string, string>> = {
  A: 'America/St_Johns',
  B: 'America/Halifax',
  C: 'America/Halifax',
  E: 'America/Moncton',
  G: 'America/Toronto',
  H: 'America/Toronto',
  J: 'America/Toronto',
  K: 'America/Toronto',
  L: 'America/Toronto',
  M: 'America/Toronto',
  N: 'America/Toronto',
  P: 'America/Toronto',
  R: 'America/Winnipeg',
  S: 'America/Regina',
  T: 'America/Edmonton',
  V: 'America/Vancouver',
  X: 'America/Yellowknife',
  Y: 'America/Whitehorse',
};

/** Australian postcodes by first digit (the state). */
const AU_DIGIT: Readonly<Record<string, string>> = {
  '0': 'Australia/Darwin',
  '1': 'Australia/Sydney',
  '2': 'Australia/Sydney',
  '3': 'Australia/Melbourne',
  '4': 'Australia/Brisbane',
  '5': 'Australia/Adelaide',
  '6': 'Australia/Perth',
  '7': 'Australia/Hobart',
  '8': 'Australia/Melbourne',
  '9': 'Australia/Brisbane',
};

/** Brazilian CEP by 2-digit prefix range (not listed: America/Sao_Paulo). */
const BR_CEP2: PrefixTable = [
  ['40', '48', 'America/Bahia'],
  ['49', '49', 'America/Maceio'], // Sergipe
  ['50', '56', 'America/Recife'],
  ['57', '57', 'America/Maceio'],
  ['58', '59', 'America/Recife'],
  ['60', '65', 'America/Fortaleza'], // Ceará, Piauí, Maranhão
  ['66', '68', 'America/Belem'], // Pará, Amapá
  ['69', '69', 'America/Manaus'],
  ['76', '76', 'America/Porto_Velho'],
  ['77', '77', 'America/Araguaina'],
  ['78', '78', 'America/Cuiaba'],
  ['79', '79', 'America/Campo_Grande'],
];

/** Mexican código postal by 2-digit prefix range (not listed: America/Mexico_City). */
const MX_CP2: PrefixTable = [
  ['21', '22', 'America/Tijuana'],
  ['23', '23', 'America/Mazatlan'],
  ['31', '33', 'America/Chihuahua'],
  ['63', '63', 'America/Mazatlan'],
  ['77', '77', 'America/Cancun'],
  ['80', '82', 'America/Mazatlan'],
  ['83', '85', 'America/Hermosillo'],
];

/** Russian postal index by 3-digit prefix range (not listed: Europe/Moscow). */
const RU_INDEX3: PrefixTable = [
  ['236', '238', 'Europe/Kaliningrad'],
  ['443', '446', 'Europe/Samara'],
  ['450', '457', 'Asia/Yekaterinburg'],
  ['460', '462', 'Asia/Yekaterinburg'],
  ['614', '629', 'Asia/Yekaterinburg'],
  ['630', '633', 'Asia/Novosibirsk'],
  ['634', '636', 'Asia/Tomsk'],
  ['644', '646', 'Asia/Omsk'],
  ['650', '654', 'Asia/Novokuznetsk'],
  ['656', '659', 'Asia/Barnaul'],
  ['660', '663', 'Asia/Krasnoyarsk'],
  ['664', '671', 'Asia/Irkutsk'],
  ['672', '674', 'Asia/Chita'],
  ['675', '678', 'Asia/Yakutsk'],
  ['679', '682', 'Asia/Vladivostok'],
  ['683', '684', 'Asia/Kamchatka'],
  ['685', '686', 'Asia/Magadan'],
  ['689', '689', 'Asia/Anadyr'],
  ['690', '692', 'Asia/Vladivostok'],
  ['693', '694', 'Asia/Sakhalin'],
];

const inTable = (table: PrefixTable, key: string): string | null =>
  table.find(([from, to]) => key >= from && key <= to)?.[2] ?? null;

/** Zone from a postal code in one of the multi-zone countries we know; null when unknown. */
export function zoneFromPostalCode(country: string, postalCode: string): string | null {
  const pc = postalCode.trim().toUpperCase();
  const digits = pc.replace(/[^0-9]/g, '');
  switch (country) {
    case 'US':
      return digits.length >= 5 ? (inTable(US_ZIP3, digits.slice(0, 3)) ?? 'America/New_York') : null;
    case 'CA':
      return /^[A-Z]\d[A-Z]/.test(pc) ? (CA_LETTER[pc[0]!] ?? null) : null;
    case 'AU':
      return /^\d{4}$/.test(pc) ? (AU_DIGIT[pc[0]!] ?? null) : null;
    case 'BR':
      return digits.length === 8 ? (inTable(BR_CEP2, digits.slice(0, 2)) ?? 'America/Sao_Paulo') : null;
    case 'MX':
      return /^\d{5}$/.test(pc) ? (inTable(MX_CP2, pc.slice(0, 2)) ?? 'America/Mexico_City') : null;
    case 'RU':
      return /^\d{6}$/.test(pc) ? (inTable(RU_INDEX3, pc.slice(0, 3)) ?? 'Europe/Moscow') : null;
    default:
      return null;
  }
}

const normCountry = (c: string | null | undefined): string | null => {
  const v = (c ?? '').trim().toUpperCase();
  return /^[A-Z]{2}$/.test(v) ? v : null;
};

/** The most populous zone of a country (ISO 3166-1 alpha-2); null for an unknown country. */
export function zoneOfCountry(country: string | null | undefined): string | null {
  const c = normCountry(country);
  if (!c) return null;
  if (PRIMARY_ZONE[c]) return PRIMARY_ZONE[c]!;
  const zones = getCountry(c as Parameters<typeof getCountry>[0])?.timezones ?? [];
  return zones[0] ?? null;
}

const validZone = (zone: string | null | undefined): zone is string => !!zone && isKnownZone(zone);

/** The cardholder's time zone and the evidence it comes from (see the file comment). */
export function timeZoneFor(evidence: TimeZoneEvidence): TimeZoneChoice {
  const country = normCountry(evidence.cardholder?.country);
  const postal = evidence.cardholder?.postalCode;
  if (country && postal) {
    const zone = zoneFromPostalCode(country, postal);
    if (validZone(zone)) return { timeZone: zone, source: 'postal-code' };
  }
  const byCountry = zoneOfCountry(country);
  if (validZone(byCountry)) return { timeZone: byCountry, source: 'billing-country' };
  const byBin = zoneOfCountry(evidence.card?.binCountry);
  if (validZone(byBin)) return { timeZone: byBin, source: 'bin-country' };
  const byMerchant = zoneOfCountry(evidence.merchantCountry);
  if (validZone(byMerchant)) return { timeZone: byMerchant, source: 'merchant-country' };
  const fallback = validZone(evidence.fallback) ? evidence.fallback : DEFAULT_CARDHOLDER_TIME_ZONE;
  return { timeZone: fallback, source: 'default' };
}
