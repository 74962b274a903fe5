import { createHash } from 'node:crypto';
import type { ExplainContext, Hint } from './explain.js';
import type { AllowlistReader, AndroidPackagePolicy } from './ports.js';
import type { VerifyOutcome } from './outcome.js';
import type { parseEnvelope } from './envelope.js';
import type { VerifyInput } from './verify.js';

/** One rejection being explained, as each kind's hints see it (see findHints). */
export interface HintRun {
  outcome: Extract<VerifyOutcome, { ok: false }>;
  ctx: ExplainContext;
  envelope: ReturnType<typeof parseEnvelope>;
  tokenNonce: Uint8Array;
  /** whether a re-run with these input fields or options gets past the failing check */
  tryWith(
    input: Partial<VerifyInput>,
    options?: { allowlist?: AllowlistReader; at?: Date },
  ): Promise<boolean>;
  /** the hints found so far; a kind adds its own */
  hints: Hint[];
}

export const sha256 = (b: Uint8Array) => new Uint8Array(createHash('sha256').update(b).digest());
export const utf8 = (s: string) => new Uint8Array(Buffer.from(s, 'utf8'));

/** The allowlist with `policy` in place of the package's stored one. */
export function withAndroid(base: AllowlistReader, policy: AndroidPackagePolicy): AllowlistReader {
  return {
    ...base,
    androidPackage: async (name) =>
      name === policy.packageName ? policy : base.androidPackage(name),
    androidPackages: async () =>
      (await base.androidPackages()).map((p) =>
        p.packageName === policy.packageName ? policy : p,
      ),
  };
}

/** An instant as the hints print it. */
export function iso(d: Date): string {
  return d.toISOString().replace('.000Z', 'Z');
}
