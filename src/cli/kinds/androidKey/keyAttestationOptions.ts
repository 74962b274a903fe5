import { Option, type Command } from 'commander';
import type { AndroidPolicyInput } from '../../../db/allowlist.js';
import { usageError } from '../../errors.js';

/** The key attestation flags of `allowlist add android` and `verify-file`. */
export interface KeyAttestationFlags {
  keyAttestation?: boolean;
  minSecurityLevel?: 'tee' | 'strongbox';
  allowUnlocked?: boolean;
  bootKey?: string[];
  maxPatchAge?: string | false;
}

/**
 * Adds the key attestation policy flags to `command`.
 * @param command `allowlist add android`, or `verify-file` (where they describe a package policy)
 */
export function addKeyAttestationOptions(command: Command): Command {
  return command
    .option('--key-attestation', 'allow Android hardware key attestation (android-key tokens)')
    .option('--no-key-attestation', 'stop allowing it')
    .addOption(
      new Option(
        '--min-security-level <level>',
        'android-key: lowest accepted security level (default tee)',
      ).choices(['tee', 'strongbox']),
    )
    .option('--allow-unlocked', 'android-key: accept unlocked devices and unverified OS builds')
    .option('--no-allow-unlocked', 'android-key: require a locked device with a verified OS')
    .option(
      '--boot-key <hex>',
      'android-key: verifiedBootKey (hex SHA-256) of a self-signed OS to trust, e.g. GrapheneOS; repeatable, replaces the list',
      (value: string, previous: string[] | undefined) => [...(previous ?? []), value],
    )
    .option(
      '--max-patch-age <age>',
      'android-key: oldest accepted OS patch level, in months (12m) or years (1y)',
    )
    .option('--no-max-patch-age', 'android-key: stop checking the patch level');
}

/** A patch age as months: `12m`, `18mo`, `1y`; `null` when it is not one (1 to 240 months). */
export function parsePatchAge(text: string): number | null {
  const m = /^(\d{1,3})(m|mo|y)$/.exec(text.trim().toLowerCase());
  if (!m) return null;
  const months = Number(m[1]) * (m[2] === 'y' ? 12 : 1);
  return months >= 1 && months <= 240 ? months : null;
}

/** The flags as policy fields; a flag not given leaves the stored value. */
export function keyAttestationPolicy(opts: KeyAttestationFlags): AndroidPolicyInput {
  const out: AndroidPolicyInput = {};
  if (opts.keyAttestation !== undefined) out.keyAttestation = opts.keyAttestation;
  if (opts.minSecurityLevel)
    out.minSecurityLevel =
      opts.minSecurityLevel === 'strongbox' ? 'StrongBox' : 'TrustedEnvironment';
  if (opts.allowUnlocked !== undefined) out.allowUnlocked = opts.allowUnlocked;
  if (opts.bootKey) {
    out.bootKeys = opts.bootKey.map((hex) => {
      const clean = hex.replace(/:/g, '').trim();
      if (!/^[0-9a-fA-F]{64}$/.test(clean))
        throw usageError(`--boot-key "${hex}" is not a 32-byte verifiedBootKey in hex`);
      return new Uint8Array(Buffer.from(clean, 'hex'));
    });
  }
  if (opts.maxPatchAge === false) out.maxPatchAgeMonths = null;
  else if (typeof opts.maxPatchAge === 'string') {
    const months = parsePatchAge(opts.maxPatchAge);
    if (months === null)
      throw usageError(
        `--max-patch-age takes months or years such as 12m or 1y (up to 240 months), got "${opts.maxPatchAge}"`,
      );
    out.maxPatchAgeMonths = months;
  }
  return out;
}

/** `allowlist list`'s words for a package's key attestation policy. */
export function keyAttestationSummary(p: {
  keyAttestation: boolean;
  minSecurityLevel: string;
  allowUnlocked: boolean;
  bootKeys: string[];
  maxPatchAgeMonths: number | null;
}): string {
  if (!p.keyAttestation) return '';
  return (
    `; key attestation: min ${p.minSecurityLevel === 'StrongBox' ? 'strongbox' : 'tee'}` +
    `${p.allowUnlocked ? ', unlocked ok' : ''}${p.bootKeys.length ? `, ${p.bootKeys.length} boot key(s)` : ''}` +
    `${p.maxPatchAgeMonths !== null ? `, patch <= ${p.maxPatchAgeMonths} months` : ''}`
  );
}
