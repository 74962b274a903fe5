import { isIP } from 'node:net';

/**
 * Why ATTEST_TRUSTED_PROXIES cannot be read, or undefined: a comma-separated list of IPv4 or IPv6
 * addresses and CIDRs (`10.0.0.0/8`, `2001:db8::/32`).
 */
export function trustedProxiesProblem(value: string): string | undefined {
  for (const entry of trustedProxyList(value)) {
    const [address, bits, more] = entry.split('/');
    const kind = isIP(address ?? '');
    const max = kind === 6 ? 128 : 32;
    if (
      kind === 0 ||
      more !== undefined ||
      (bits !== undefined && !(/^\d{1,3}$/.test(bits) && Number(bits) <= max))
    )
      return `"${entry.slice(0, 60)}"`;
  }
  return undefined;
}

/** The entries of ATTEST_TRUSTED_PROXIES, trimmed; empty ones dropped. */
export function trustedProxyList(value: string): string[] {
  return value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}
