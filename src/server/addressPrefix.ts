import { isIP } from 'node:net';

/**
 * The unit clients are told apart by: an IPv4 address as it is, an IPv6 address by its /64 (one
 * subscriber or host usually holds a whole /64, so its addresses are one client). IPv4-mapped
 * IPv6 (`::ffff:192.0.2.1`) is the IPv4 address. `undefined` stays undefined.
 */
export function addressPrefix(address: string | undefined): string | undefined {
  if (address === undefined) return undefined;
  const kind = isIP(address);
  if (kind === 4) return address;
  if (kind !== 6) return address;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1];
  const [head = '', tail = ''] = address.toLowerCase().split('%')[0]!.split('::');
  const headGroups = head ? head.split(':') : [];
  const tailGroups = address.includes('::') ? (tail ? tail.split(':') : []) : [];
  // an embedded IPv4 tail (a::1.2.3.4) lies in the low 64 bits: it does not change the prefix
  const width = (groups: string[]) => groups.reduce((n, g) => n + (g.includes('.') ? 2 : 1), 0);
  const groups = address.includes('::')
    ? [
        ...headGroups,
        ...Array<string>(8 - width(headGroups) - width(tailGroups)).fill('0'),
        ...tailGroups,
      ]
    : headGroups;
  return `${groups
    .slice(0, 4)
    .map((g) => g.replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}
