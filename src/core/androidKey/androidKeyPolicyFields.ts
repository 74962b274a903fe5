import { z } from 'zod';
import { deviceLimitField, switchField, textSchema, type PolicyField } from '../policyFields.js';
import type { DeviceLimit } from '../ports.js';
import { ISSUER_LIMIT_FIELD } from './issuerVelocity.js';

/** A package's key attestation rules as `allowlist list` reads them. */
export interface AndroidKeyRules {
  keyAttestation: boolean;
  minSecurityLevel: string;
  allowUnlocked: boolean;
  bootKeys: readonly string[];
  maxPatchAgeMonths: number | null;
  maxKeysPerIssuer?: DeviceLimit | null;
}

/** A patch age as months: `12m`, `18mo`, `1y`; `null` when it is not one (1 to 240 months). */
export function parsePatchAge(text: string): number | null {
  const m = /^(\d{1,3})(m|mo|y)$/.exec(text.trim().toLowerCase());
  if (!m) return null;
  const months = Number(m[1]) * (m[2] === 'y' ? 12 : 1);
  return months >= 1 && months <= 240 ? months : null;
}

/**
 * The android-key (hardware key attestation) policy of an Android package: the flags of
 * `allowlist add android` and `verify-file` for it, their parsing and `allowlist list`'s words
 * (shown only while key attestation is allowed).
 */
export const ANDROID_KEY_POLICY_FIELDS: readonly PolicyField<AndroidKeyRules>[] = [
  switchField('keyAttestation', '--key-attestation', [
    'allow Android hardware key attestation (android-key tokens)',
    'stop allowing it',
  ]),
  {
    key: 'minSecurityLevel',
    flag: '--min-security-level <level>',
    help: 'android-key: lowest accepted security level (default tee)',
    choices: ['tee', 'strongbox'],
    stored: z.enum(['TrustedEnvironment', 'StrongBox']),
    text: textSchema((text) => ({
      ok: true,
      value: text === 'strongbox' ? 'StrongBox' : 'TrustedEnvironment',
    })),
    summary: (p) => `min ${p.minSecurityLevel === 'StrongBox' ? 'strongbox' : 'tee'}`,
    // anything but StrongBox is the lowest level a package may ask for
    read: (v) => (v === 'StrongBox' ? 'StrongBox' : 'TrustedEnvironment'),
  },
  switchField(
    'allowUnlocked',
    '--allow-unlocked',
    [
      'android-key: accept unlocked devices and unverified OS builds',
      'android-key: require a locked device with a verified OS',
    ],
    (p) => (p.allowUnlocked ? 'unlocked ok' : undefined),
  ),
  {
    key: 'bootKeys',
    flag: '--boot-key <hex>',
    help: 'android-key: verifiedBootKey (hex SHA-256) of a self-signed OS to trust, e.g. GrapheneOS; repeatable, replaces the list',
    repeatable: true,
    stored: z
      .array(
        z.custom<Uint8Array>(
          (v) => v instanceof Uint8Array && v.length === 32,
          'expected 32 bytes',
        ),
      )
      .max(32),
    text: textSchema((hex) => {
      const clean = hex.replace(/:/g, '').trim();
      return /^[0-9a-fA-F]{64}$/.test(clean)
        ? { ok: true, value: new Uint8Array(Buffer.from(clean, 'hex')) }
        : { ok: false, problem: `--boot-key "${hex}" is not a 32-byte verifiedBootKey in hex` };
    }),
    summary: (p) => (p.bootKeys.length ? `${p.bootKeys.length} boot key(s)` : undefined),
    // stored as hex (the upsert writes bytes so)
    read: (v) => (v as readonly string[]).map((hex) => new Uint8Array(Buffer.from(hex, 'hex'))),
  },
  {
    key: 'maxPatchAgeMonths',
    flag: '--max-patch-age <age>',
    help: 'android-key: oldest accepted OS patch level, in months (12m) or years (1y)',
    text: textSchema((text) => {
      const months = parsePatchAge(text);
      return months !== null
        ? { ok: true, value: months }
        : {
            ok: false,
            problem: `--max-patch-age takes months or years such as 12m or 1y (up to 240 months), got "${text}"`,
          };
    }),
    no: { help: 'android-key: stop checking the patch level', value: null },
    stored: z.number().int().min(1).max(240).nullable(),
    summary: (p) =>
      p.maxPatchAgeMonths !== null ? `patch <= ${p.maxPatchAgeMonths} months` : undefined,
  },
  // leaked-keybox defence: one text column (N/SECONDS), read back as a limit
  ISSUER_LIMIT_FIELD,
];

/** `--max-verifies-per-device` of an Android package: only android-key devices are counted. */
export const ANDROID_DEVICE_LIMIT_FIELD = deviceLimitField<{
  maxVerifiesPerDevice?: DeviceLimit | null;
}>(
  'an android-key key (its key id): its registration and every later signature count. Play Integrity tokens carry no device identity and are never counted',
  (limit) => `${limit} per android-key device`,
);
