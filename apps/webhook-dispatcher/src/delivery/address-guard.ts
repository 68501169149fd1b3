import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';

/**
 * SSRF protection: webhook URLs must not reach loopback, private, link-local, CGNAT, multicast or
 * cloud-metadata addresses. The check runs on the address the socket actually connects to (a custom
 * DNS lookup in the HTTP agents), so a public name that resolves to a private address is refused too.
 */
const blocked = new net.BlockList();
for (const [net4, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  blocked.addSubnet(net4, prefix, 'ipv4');
}
for (const [net6, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
  ['fd00:ec2::', 32],
] as const) {
  blocked.addSubnet(net6, prefix, 'ipv6');
}

export function isAllowedAddress(address: string): boolean {
  const family = net.isIP(address);
  if (family === 0) return false;
  // IPv4-mapped IPv6 (::ffff:10.0.0.1) is judged as the IPv4 address it carries.
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return !blocked.check(mapped[1]!, 'ipv4');
  return !blocked.check(address, family === 6 ? 'ipv6' : 'ipv4');
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

function guardedLookup(hostname: string, options: dns.LookupOptions, callback: LookupCallback): void {
  dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, '');
    const list = addresses as dns.LookupAddress[];
    if (list.length === 0 || list.some((a) => !isAllowedAddress(a.address))) {
      return callback(new AddressNotAllowedError() as NodeJS.ErrnoException, '');
    }
    if (options.all) return callback(null, list);
    return callback(null, list[0]!.address, list[0]!.family);
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
