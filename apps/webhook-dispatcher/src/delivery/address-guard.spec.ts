import dns from 'node:dns';
import { describe, expect, it, vi } from 'vitest';
import { guardedLookup, isAllowedAddress, literalAddressAllowed } from './address-guard';

// decisions §9 and issue 9: a webhook may only reach global unicast addresses. IPv4 carried inside
// IPv6 (mapped, compatible, SIIT, NAT64, 6to4, Teredo) is judged as the IPv4 address it carries.
describe('webhook address guard', () => {
  it.each([
    // IPv4 global unicast
    ['8.8.8.8', true],
    ['93.184.216.34', true],
    ['1.1.1.1', true],
    // IPv4 special purpose
    ['0.0.0.0', false],
    ['10.1.2.3', false],
    ['100.64.0.1', false],
    ['127.0.0.1', false],
    ['169.254.169.254', false],
    ['172.16.0.1', false],
    ['172.31.255.255', false],
    ['192.0.0.8', false],
    ['192.0.2.1', false],
    ['192.88.99.1', false],
    ['192.168.1.1', false],
    ['198.18.0.1', false],
    ['198.51.100.7', false],
    ['203.0.113.9', false],
    ['224.0.0.1', false],
    ['240.0.0.1', false],
    ['255.255.255.255', false],
  ])('IPv4 %s → %s', (address, allowed) => {
    expect(isAllowedAddress(address)).toBe(allowed);
  });

  it.each([
    // IPv6 global unicast
    ['2606:4700:4700::1111', true],
    ['2a00:1450:4001:81c::200e', true],
    ['2001:4860:4860::8888', true],
    // outside 2000::/3, or special purpose inside it
    ['::', false],
    ['::1', false],
    ['fe80::1', false],
    ['fc00::1', false],
    ['fd00:ec2::254', false],
    ['ff02::1', false],
    ['100::1', false],
    ['2001:db8::1', false],
    ['3fff::1', false],
    ['2001:2::1', false],
    ['2001:10::1', false],
    ['5f00::1', false],
    ['4000::1', false],
    ['fe80::1%eth0', false],
  ])('IPv6 %s → %s', (address, allowed) => {
    expect(isAllowedAddress(address)).toBe(allowed);
  });

  it.each([
    // IPv4-mapped ::ffff:a.b.c.d, in both notations
    ['::ffff:127.0.0.1', false],
    ['::ffff:7f00:1', false],
    ['::ffff:a9fe:a9fe', false],
    ['::ffff:8.8.8.8', true],
    ['::ffff:808:808', true],
    // SIIT IPv4-translated ::ffff:0:a.b.c.d
    ['::ffff:0:10.0.0.1', false],
    ['::ffff:0:a00:1', false],
    ['::ffff:0:8.8.8.8', true],
    // IPv4-compatible ::a.b.c.d (deprecated)
    ['::127.0.0.1', false],
    ['::a9fe:a9fe', false],
    ['::8.8.8.8', true],
    // NAT64 well-known prefix 64:ff9b::/96
    ['64:ff9b::10.0.0.1', false],
    ['64:ff9b::a9fe:a9fe', false],
    ['64:ff9b::7f00:1', false],
    ['64:ff9b::8.8.8.8', true],
    // NAT64 local-use 64:ff9b:1::/48, read as a /96
    ['64:ff9b:1::192.168.0.1', false],
    ['64:ff9b:1::8.8.8.8', true],
    ['64:ff9b:1:1::8.8.8.8', false],
    // 6to4 2002:AABB:CCDD::/48 carries AA.BB.CC.DD
    ['2002:7f00:1::1', false],
    ['2002:a9fe:a9fe::', false],
    ['2002:c0a8:101::1', false],
    ['2002:808:808::1', true],
    // Teredo 2001:0:<server>:<flags>:<port>:<client XOR ffff:ffff>
    ['2001:0:4136:e378:8000:63bf:f5ff:fffe', false], // client 10.0.0.1
    ['2001:0:4136:e378:8000:63bf:80ff:fffe', false], // client 127.0.0.1
    ['2001:0:4136:e378:8000:63bf:f7f7:f7f7', true], // client 8.8.8.8, server 65.54.227.120
    ['2001:0:a00:1:8000:63bf:f7f7:f7f7', false], // server 10.0.0.1
  ])('embedded IPv4 %s → %s', (address, allowed) => {
    expect(isAllowedAddress(address)).toBe(allowed);
  });

  it.each([
    ['https://[::ffff:10.0.0.1]/hook', false],
    ['https://[::ffff:169.254.169.254]/latest/meta-data', false],
    ['https://[64:ff9b::127.0.0.1]/hook', false],
    ['https://[2002:a00:1::1]/hook', false],
    ['https://[2001:db8::1]/hook', false],
    ['https://[2606:4700:4700::1111]/hook', true],
    ['https://0x7f.1/hook', false],
    ['https://8.8.8.8/hook', true],
    ['https://hooks.example.com/hook', true],
  ])('literal address in the URL %s → %s', (url, allowed) => {
    expect(literalAddressAllowed(url)).toBe(allowed);
  });

  it('refuses what is not an address', () => {
    expect(isAllowedAddress('example.com')).toBe(false);
    expect(isAllowedAddress('')).toBe(false);
  });

  it("shares one DNS lookup among concurrent deliveries to a host: a name server that never answers cannot take every thread of libuv's pool", async () => {
    // dns.lookup runs on libuv's pool (4 threads): 64 pushes in flight to a host whose name server hangs
    // held them all, and every other merchant's lookups waited behind (the webhook audit, session 25).
    const lookup = vi.spyOn(dns, 'lookup');
    try {
      const once = () =>
        new Promise<string>((resolve) => {
          guardedLookup('localhost', {}, (err) =>
            resolve(err ? ((err as { code?: string }).code ?? err.message) : 'ok'),
          );
        });
      const answers = await Promise.all(Array.from({ length: 8 }, once));
      expect(answers).toEqual(Array(8).fill('ADDRESS_NOT_ALLOWED'));
      expect(lookup).toHaveBeenCalledTimes(1);
      // Nothing is cached: a later delivery asks again.
      expect(await once()).toBe('ADDRESS_NOT_ALLOWED');
      expect(lookup).toHaveBeenCalledTimes(2);
    } finally {
      lookup.mockRestore();
    }
  });
});
