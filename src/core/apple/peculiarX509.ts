import { createRequire } from 'node:module';

type PeculiarX509 = typeof import('@peculiar/x509');
let peculiar: PeculiarX509 | undefined;

/**
 * @peculiar/x509, loaded on first use: it is the costliest module of a start (a third of a second
 * of CPU), and only certificate making and inspection need it. `attest serve` loads it once it listens.
 */
export function peculiarX509(): PeculiarX509 {
  peculiar ??= createRequire(import.meta.url)('@peculiar/x509') as PeculiarX509;
  return peculiar;
}
