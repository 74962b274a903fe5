import { BlockList, isIP } from 'node:net';

/** The client's address from the TCP peer and the forwarding headers. */
export type ClientAddress = (
  peer: string | undefined,
  forwarded: { xff?: string | undefined; forwarded?: string | undefined },
) => string | undefined;

/**
 * The client's address for the per-address failure budget and the log: the TCP peer, unless the
 * peer is one of ATTEST_TRUSTED_PROXIES (addresses or CIDRs). Then the forwarded chain is read from
 * the right: `X-Forwarded-For` (every field, in order), or when there is none, the `for=` of
 * `Forwarded` (RFC 7239). Each proxy appends the address it got the request from, so entries
 * right of the first untrusted one were written by trusted proxies and the first untrusted one is
 * the client; anything left of it is the client's own claim, and ignored. An entry that is not an
 * address (`unknown`, an obfuscated name, garbage) ends the walk at the last trusted hop. A peer
 * that is not trusted has its headers ignored: a spoofed `X-Forwarded-For` changes nothing.
 */
export function createClientAddress(trusted: readonly string[]): ClientAddress {
  if (trusted.length === 0) return (peer) => peer;
  const list = new BlockList();
  for (const entry of trusted) {
    const [address, bits] = entry.split('/') as [string, string | undefined];
    const type = isIP(address) === 6 ? 'ipv6' : 'ipv4';
    if (bits === undefined) list.addAddress(address, type);
    else list.addSubnet(address, Number(bits), type);
  }
  const isTrusted = (address: string) => {
    const plain = unmapped(address);
    return list.check(plain, isIP(plain) === 6 ? 'ipv6' : 'ipv4');
  };
  return (peer, headers) => {
    if (peer === undefined || !isTrusted(peer)) return peer;
    const chain = headers.xff
      ? headers.xff.split(',').map((s) => s.trim())
      : headers.forwarded
        ? forwardedFor(headers.forwarded)
        : [];
    let client = peer;
    for (let i = chain.length - 1; i >= 0; i--) {
      const hop = hopAddress(chain[i]!);
      if (hop === undefined) break;
      client = hop;
      if (!isTrusted(hop)) break;
    }
    return client;
  };
}

/** `::ffff:192.0.2.1` is 192.0.2.1 */
function unmapped(address: string): string {
  const m = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return m ? m[1]! : address;
}

/** An X-Forwarded-For or Forwarded entry as an address (port and brackets dropped), else undefined. */
function hopAddress(entry: string): string | undefined {
  let s = entry.trim().replace(/^"|"$/g, '');
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(s);
  if (bracketed) s = bracketed[1]!;
  else if (/^\d+\.\d+\.\d+\.\d+:\d+$/.test(s)) s = s.slice(0, s.lastIndexOf(':'));
  return isIP(s) ? unmapped(s) : undefined;
}

/** The `for=` values of a Forwarded header, in order (one per element; elements are comma-separated). */
function forwardedFor(header: string): string[] {
  const out: string[] = [];
  for (const element of header.slice(0, 8192).split(',')) {
    const pair = element
      .split(';')
      .map((p) => p.trim())
      .find((p) => p.toLowerCase().startsWith('for='));
    // an element without for= is a hop that did not say: nothing right of it can be vouched for
    out.push(pair ? pair.slice(4) : 'unknown');
  }
  return out;
}
