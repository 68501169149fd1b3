import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';

/**
 * SSRF protection: a webhook may only reach global unicast addresses (decisions §9): never
 * loopback, private, link-local, CGNAT, multicast, documentation or cloud-metadata addresses. The
 * check runs on the address the socket actually connects to (a custom DNS lookup in the HTTP
 * agents), so a public name that resolves to a private address is refused too. IPv4 carried inside
 * IPv6 (mapped, SIIT, compatible, NAT64, 6to4, Teredo) is judged as the IPv4 address it carries:
 * the network would deliver it there.
 */

/** IPv4 special-purpose ranges (IANA registry) that are not global unicast. */
const blockedV4 = new net.BlockList();
for (const [net4, prefix] of [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // CGNAT
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, cloud metadata
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation (TEST-NET-1)
  ['192.88.99.0', 24], // 6to4 relay anycast (deprecated)
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation (TEST-NET-2)
  ['203.0.113.0', 24], // documentation (TEST-NET-3)
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const) {
  blockedV4.addSubnet(net4, prefix, 'ipv4');
}

/** IPv6 global unicast is 2000::/3 ... */
const globalV6 = new net.BlockList();
globalV6.addSubnet('2000::', 3, 'ipv6');
/** ... minus the special-purpose ranges inside it (Teredo, 2001::/32, is decoded before this). */
const blockedV6 = new net.BlockList();
for (const [net6, prefix] of [
  ['2001::', 23], // IETF protocol assignments (benchmarking, ORCHID, ...)
  ['2001:db8::', 32], // documentation
  ['3fff::', 20], // documentation
  ['5f00::', 16], // SRv6 SIDs
] as const) {
  blockedV6.addSubnet(net6, prefix, 'ipv6');
}

function ipv4Allowed(address: string): boolean {
  return !blockedV4.check(address, 'ipv4');
}

/** The 16 bytes of a valid IPv6 address (`::` and a dotted IPv4 tail expanded). */
function ipv6Bytes(address: string): Uint8Array {
  let text = address;
  const tail = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (tail) {
    const [a, b, c, d] = tail.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, tail.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, rest] = text.split('::') as [string, string | undefined];
  const groups = (part: string | undefined): string[] => (part ? part.split(':') : []);
  const left = groups(head);
  const right = groups(rest);
  const all =
    rest === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  const bytes = new Uint8Array(16);
  all.forEach((g, i) => {
    const v = parseInt(g, 16);
    bytes[2 * i] = v >> 8;
    bytes[2 * i + 1] = v & 0xff;
  });
  return bytes;
}

const zero = (b: Uint8Array, from: number, to: number): boolean => b.subarray(from, to).every((x) => x === 0);
const dotted = (b: Uint8Array, at: number, mask = 0): string =>
  [0, 1, 2, 3].map((i) => (b[at + i]! ^ mask).toString()).join('.');
const startsWith = (b: Uint8Array, prefix: number[]): boolean => prefix.every((x, i) => b[i] === x);

/**
 * The IPv4 addresses an IPv6 address carries, when it is one of the forms that embed one; null
 * otherwise. A form whose layout we cannot read gives ['0.0.0.0'], which is refused.
 */
function embeddedIpv4(b: Uint8Array): string[] | null {
  // ::ffff:a.b.c.d IPv4-mapped
  if (zero(b, 0, 10) && b[10] === 0xff && b[11] === 0xff) return [dotted(b, 12)];
  // ::ffff:0:a.b.c.d SIIT IPv4-translated
  if (zero(b, 0, 8) && b[8] === 0xff && b[9] === 0xff && zero(b, 10, 12)) return [dotted(b, 12)];
  // ::a.b.c.d IPv4-compatible (deprecated); :: and ::1 read as 0.0.0.0 and 0.0.0.1, both refused
  if (zero(b, 0, 12)) return [dotted(b, 12)];
  // 64:ff9b::/96 NAT64 well-known prefix
  if (startsWith(b, [0x00, 0x64, 0xff, 0x9b]) && zero(b, 4, 12)) return [dotted(b, 12)];
  // 64:ff9b:1::/48 NAT64 local use: read as a /96 (what DNS64 uses); any other layout is refused
  if (startsWith(b, [0x00, 0x64, 0xff, 0x9b, 0x00, 0x01])) return zero(b, 6, 12) ? [dotted(b, 12)] : ['0.0.0.0'];
  // 2002:AABB:CCDD::/48 6to4
  if (startsWith(b, [0x20, 0x02])) return [dotted(b, 2)];
  // 2001:0:<server IPv4>:<flags>:<port>:<client IPv4 XOR ffff:ffff> Teredo: both ends must be global
  if (startsWith(b, [0x20, 0x01, 0x00, 0x00])) return [dotted(b, 4), dotted(b, 12, 0xff)];
  return null;
}

export function isAllowedAddress(address: string): boolean {
  const family = net.isIP(address);
  if (family === 4) return ipv4Allowed(address);
  // A zone id (fe80::1%eth0) scopes the address to a link: never global.
  if (family !== 6 || address.includes('%')) return false;
  const embedded = embeddedIpv4(ipv6Bytes(address));
  if (embedded) return embedded.every(ipv4Allowed);
  return globalV6.check(address, 'ipv6') && !blockedV6.check(address, 'ipv6');
}

export class AddressNotAllowedError extends Error {
  readonly code = 'ADDRESS_NOT_ALLOWED';
  constructor() {
    super('address not allowed');
  }
}

type LookupCallback = (
  err: NodeJS.ErrnoException | null,
  address: string | dns.LookupAddress[],
  family?: number,
) => void;

/**
 * Lookups under way, by host name and family, with the deliveries waiting for each. dns.lookup runs on
 * libuv's thread pool (4 threads): without sharing, one merchant's pushes to a host whose name server
 * never answers (64 in flight) held every thread, and every other merchant's lookups waited behind them.
 * Nothing is cached: each answer serves only the lookups that were waiting for it.
 */
const lookupsUnderWay = new Map<string, ((err: NodeJS.ErrnoException | null, list: dns.LookupAddress[]) => void)[]>();

/** The agents' DNS lookup: every address the name has must be allowed (isAllowedAddress). */
export function guardedLookup(hostname: string, options: dns.LookupOptions, callback: LookupCallback): void {
  const answer = (err: NodeJS.ErrnoException | null, list: dns.LookupAddress[]): void => {
    if (err) return callback(err, '');
    if (list.length === 0 || list.some((a) => !isAllowedAddress(a.address))) {
      return callback(new AddressNotAllowedError() as NodeJS.ErrnoException, '');
    }
    if (options.all) return callback(null, list);
    return callback(null, list[0]!.address, list[0]!.family);
  };
  const key = `${hostname}\0${options.family ?? 0}\0${options.hints ?? 0}`;
  const waiting = lookupsUnderWay.get(key);
  if (waiting) {
    waiting.push(answer);
    return;
  }
  lookupsUnderWay.set(key, [answer]);
  dns.lookup(hostname, { family: options.family, hints: options.hints, all: true }, (err, addresses) => {
    const answers = lookupsUnderWay.get(key) ?? [];
    lookupsUnderWay.delete(key);
    for (const a of answers) a(err, err ? [] : addresses);
  });
}

/** HTTP agents for webhook delivery; with allowPrivate the guard is off (local development). */
export function webhookAgents(allowPrivate: boolean): { httpAgent: http.Agent; httpsAgent: https.Agent } {
  const opts = { keepAlive: true, maxSockets: 256, ...(allowPrivate ? {} : { lookup: guardedLookup as never }) };
  return { httpAgent: new http.Agent(opts), httpsAgent: new https.Agent(opts) };
}

/** URLs with a literal IP skip DNS: they are checked here before any connection. */
export function literalAddressAllowed(url: string): boolean {
  const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
  return net.isIP(host) === 0 || isAllowedAddress(host);
}
