/**
 * Leaked-keybox defence (`allowlist add android --max-keys-per-issuer N/WINDOW`): a keybox is a
 * device's factory attestation key with its certificate chain; copied off one device it attests
 * any number of keys, each chain genuine and unrevoked until Google lists it. One real device
 * makes a few keys per app; a leaked keybox behind a farm of emulators makes many. So a package
 * may cap how many new keys one issuing certificate (the certificate above the leaf: the
 * keybox's own, or for RKP chains the per-device intermediate) registers in each window.
 *
 * The count is shared by every instance (one atomic upsert of the store), kept per package and
 * per API key mode (a test key's registrations never count for live keys), and only for
 * registrations that passed every other check: a refused token never adds to it.
 */
import { createHash, X509Certificate } from 'node:crypto';
import { z } from 'zod';
import { windowStartOf } from '../deviceVelocity.js';
import {
  formatDeviceLimit,
  parseDeviceLimit,
  textSchema,
  type Parsed,
  type PolicyField,
} from '../policyFields.js';
import type { Trace } from '../outcome.js';
import type { AndroidPackagePolicy, DeviceLimit, KeyMode } from '../ports.js';

const FLAG = '--max-keys-per-issuer';

/** One new key counted under its issuing certificate, in the window holding `at`. */
export interface IssuerKeyCount {
  packageName: string;
  /** SHA-256 of the issuing certificate's DER: the counter's identity */
  issuer: Uint8Array;
  /** the issuing certificate's serial (hex) and subject, for `attest stats` */
  serial: string;
  subject: string;
  mode: KeyMode;
  windowStart: Date;
  periodSeconds: number;
  /** count only while the window holds fewer than this; absent: count in any case (observed) */
  max?: number;
  at: Date;
}

/** The shared per-issuer counts (src/db/issuerVelocity.ts). */
export interface IssuerVelocityStore {
  /**
   * Counts one key in one statement: the new count, or null when the window already holds `max`
   * (nothing counted).
   */
  count(entry: IssuerKeyCount): Promise<number | null>;
}

/** The stored form of a limit: `N/SECONDS` (one text column; `allowlist list` formats it). */
export function storedIssuerLimit(limit: DeviceLimit): string {
  return `${limit.max}/${limit.periodSeconds}`;
}

/** A stored limit back to its value; null for none (or a form this version does not read). */
export function readIssuerLimit(stored: unknown): DeviceLimit | null {
  if (typeof stored !== 'string') return null;
  const m = /^(\d+)\/(\d+)$/.exec(stored);
  return m ? { max: Number(m[1]), periodSeconds: Number(m[2]) } : null;
}

function parseIssuerLimit(text: string): Parsed<string> {
  const parsed = parseDeviceLimit(text);
  if (!parsed.ok)
    return { ok: false, problem: parsed.problem.replace('--max-verifies-per-device', FLAG) };
  return { ok: true, value: storedIssuerLimit(parsed.value) };
}

/** `--max-keys-per-issuer N/WINDOW` and its `--no-` form, for an Android package. */
export const ISSUER_LIMIT_FIELD: PolicyField<{ maxKeysPerIssuer?: DeviceLimit | null }> = {
  key: 'maxKeysPerIssuer',
  flag: `${FLAG} <n/window>`,
  help: 'android-key: at most N new keys per issuing certificate (the one above the leaf) in each fixed window, e.g. 3/1h or 20/1d; the next registration is refused (android_issuer_overused): a leaked keybox attests many keys, a real device a few',
  text: textSchema(parseIssuerLimit),
  no: { help: 'android-key: stop counting keys per issuing certificate', value: null },
  stored: z
    .string()
    .regex(/^\d{1,7}\/\d{2,7}$/)
    .nullable(),
  summary: (e) =>
    e.maxKeysPerIssuer ? `${formatDeviceLimit(e.maxKeysPerIssuer)} keys per issuer` : undefined,
  read: readIssuerLimit,
};

/** The issuing certificate of a chain (leaf first): its digest, serial and subject. */
export function issuerOf(
  chain: readonly Uint8Array[],
): { digest: Uint8Array; serial: string; subject: string } | null {
  const der = chain[1];
  if (!der) return null;
  const cert = new X509Certificate(Buffer.from(der));
  return {
    digest: createHash('sha256').update(der).digest(),
    serial: cert.serialNumber.toLowerCase(),
    subject: cert.subject.replace(/\n/g, ', '),
  };
}

export interface IssuerVelocityDeps {
  /** absent (verify-file): nothing is counted and the step says so */
  store: IssuerVelocityStore | undefined;
  mode: KeyMode;
  now: Date;
  trace: Trace;
}

/**
 * The policy step android.issuerVelocity of a registration, run after every other check and just
 * before the key is registered. Enforced, it counts the key only while the window holds fewer
 * than N, and a full window refuses (android_issuer_overused, nothing counted). Observed, it
 * counts the key in any case (so the figures show what the rule would do) and records the
 * failure past N.
 */
export async function checkIssuerVelocity(
  chain: readonly Uint8Array[],
  policy: Pick<AndroidPackagePolicy, 'packageName' | 'maxKeysPerIssuer' | 'observe'>,
  deps: IssuerVelocityDeps,
): Promise<void> {
  const input = {
    ...deps,
    chain,
    packageName: policy.packageName,
    limit: policy.maxKeysPerIssuer,
    // observed: every key counts (the figures show what enforcing would do)
    observed: policy.observe?.includes('android_issuer_overused') === true,
  };
  const { trace, limit } = input;
  const check = 'android.issuerVelocity';
  if (!limit) {
    trace.skip(check, `${input.packageName} sets no limit of keys per issuing certificate`);
    return;
  }
  if (!input.store) {
    trace.skip(check, 'keys per issuing certificate are counted by the server only');
    return;
  }
  trace.current(check);
  const issuer = issuerOf(input.chain);
  if (!issuer) {
    // a chain of the leaf alone verified only under a configured root that signs leaves directly
    trace.skip(check, 'the chain has no certificate above the leaf');
    return;
  }
  const { observed } = input;
  const windowStart = windowStartOf(input.now, limit.periodSeconds);
  const count = await input.store.count({
    packageName: input.packageName,
    issuer: issuer.digest,
    serial: issuer.serial,
    subject: issuer.subject,
    mode: input.mode,
    windowStart,
    periodSeconds: limit.periodSeconds,
    ...(observed ? {} : { max: limit.max }),
    at: input.now,
  });
  const window = `the window from ${windowStart.toISOString()} (${limit.periodSeconds} s)`;
  const who = `issuing certificate serial ${issuer.serial}`;
  if (count === null || count > limit.max) {
    trace.policyFailed(
      check,
      'android_issuer_overused',
      count === null
        ? `${who} already attested ${limit.max} new keys for ${input.packageName} in ${window}; the package allows ${limit.max} (this key is not registered, nor counted)`
        : `${who} attested ${count} new keys for ${input.packageName} in ${window}; the package allows ${limit.max}`,
    );
    return;
  }
  trace.pass(check, `new key ${count} of at most ${limit.max} under ${who} in ${window}`);
}
