/**
 * Checks 6 to 9 of Android key attestation (docs/token-format.md, android-key): the package entry's
 * policy against what a key description says. Registration runs them on the fresh description,
 * assertion on the facts stored with the key and today's entry, so a stricter policy applies to
 * keys registered before it.
 */
import { checkAppScope, type AppScope } from '../appScope.js';
import { Rejection } from '../reasons.js';
import type { AllowlistReader, AndroidPackagePolicy } from '../ports.js';
import type { AndroidBootState, AndroidSecurityLevel } from './androidKeyTokenDetails.js';
import type { Trace } from '../outcome.js';
import type { CheckId } from '../checkTitles.js';

/** The ordered policy checks. */
export const POLICY_CHECKS = [
  'android.package',
  'android.appSignature',
  'android.securityLevel',
  'android.bootState',
  'android.patchLevel',
] as const satisfies readonly CheckId[];

/** What the policy reads of a key. */
export interface AttestedFacts {
  /** packages the key description names (attestationApplicationId); null = none stated */
  attestedPackages: readonly string[] | null;
  signatureDigests: readonly Uint8Array[];
  attestationSecurityLevel: AndroidSecurityLevel;
  keyMintSecurityLevel: AndroidSecurityLevel;
  /** null: no hardware-enforced root of trust */
  rootOfTrust: {
    deviceLocked: boolean;
    verifiedBootState: AndroidBootState;
    verifiedBootKey: Uint8Array;
  } | null;
  osPatchLevel: number | null;
}

const RANK: Record<AndroidSecurityLevel, number> = {
  Software: 0,
  TrustedEnvironment: 1,
  StrongBox: 2,
};

/** The lower of two security levels. */
export function lowerLevel(a: AndroidSecurityLevel, b: AndroidSecurityLevel): AndroidSecurityLevel {
  return RANK[a] <= RANK[b] ? a : b;
}

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** Months between a YYYYMM patch level and `now` (UTC). */
export function patchAgeMonths(patch: number, now: Date): number {
  const year = Math.floor(patch / 100);
  const month = patch % 100;
  return now.getUTCFullYear() * 12 + now.getUTCMonth() + 1 - (year * 12 + month);
}

/**
 * Runs checks 6 to 9 for `packageName`; throws the first failing check's `Rejection`, except for
 * the policy rules the entry observes (security level, boot state, patch level), which the trace
 * records before the checks go on.
 * @returns the package's entry
 */
export async function checkKeyPolicy(
  packageName: string,
  facts: AttestedFacts,
  deps: { allowlist: AllowlistReader; trace: Trace; now: Date; appScope?: AppScope | undefined },
): Promise<AndroidPackagePolicy> {
  const { trace } = deps;

  trace.current('android.package');
  if (facts.attestedPackages && !facts.attestedPackages.includes(packageName)) {
    throw new Rejection(
      'android_package_not_allowed',
      `the key description names ${facts.attestedPackages.map((p) => `"${p}"`).join(', ') || 'no package'}, not "${packageName}"`,
    );
  }
  if (!facts.attestedPackages) {
    throw new Rejection(
      'android_package_not_allowed',
      'the key description has no attestationApplicationId: it does not say which app made the key',
    );
  }
  const policy = await deps.allowlist.androidPackage(packageName);
  if (!policy)
    throw new Rejection(
      'android_package_not_allowed',
      `"${packageName}" is not on the Android allowlist`,
    );
  if (!policy.keyAttestation)
    throw new Rejection(
      'android_package_not_allowed',
      `"${packageName}" is allowlisted without key attestation (--key-attestation)`,
    );
  // the package the attestation (registration) or the registered key (assertion) names
  checkAppScope(deps.appScope, packageName, 'package');
  trace.pass('android.package', `"${packageName}" is attested and allowlisted for key attestation`);
  trace.observe(policy.observe ?? []);

  trace.current('android.appSignature');
  if (policy.certificateDigests.length === 0) {
    trace.skip('android.appSignature', 'the package lists no signing certificate digests');
  } else {
    const allowed = new Set(policy.certificateDigests.map(hex));
    if (!facts.signatureDigests.some((d) => allowed.has(hex(d)))) {
      throw new Rejection(
        'android_app_signature_mismatch',
        `none of the attested signing certificate digests (${facts.signatureDigests.map(hex).join(', ') || 'none'}) is allowlisted`,
      );
    }
    trace.pass('android.appSignature', 'an attested signing certificate digest is allowlisted');
  }

  trace.current('android.securityLevel');
  const minimum = policy.minSecurityLevel ?? 'TrustedEnvironment';
  const level = lowerLevel(facts.attestationSecurityLevel, facts.keyMintSecurityLevel);
  const levels = `attestation ${facts.attestationSecurityLevel}, KeyMint ${facts.keyMintSecurityLevel}`;
  if (level === 'Software') {
    // never observed: a software key's description is signed by a key outside any secure
    // hardware, so nothing in it (the app, the challenge included) is proven
    throw new Rejection(
      'android_security_level_insufficient',
      `${levels}: the package requires ${minimum} (a software-attested key never passes)`,
    );
  }
  if (RANK[level] < RANK[minimum]) {
    trace.policyFailed(
      'android.securityLevel',
      'android_security_level_insufficient',
      `${levels}: the package requires ${minimum}`,
    );
  } else trace.pass('android.securityLevel', `${level} meets the minimum ${minimum}`);

  trace.current('android.bootState');
  const root = facts.rootOfTrust;
  if (!root) {
    // never observed nor allowed (Google's default constraints require one): without it the key
    // description says nothing of the boot chain, only a software Keystore omits it
    throw new Rejection(
      'android_boot_state_insufficient',
      'the key description has no hardware-enforced rootOfTrust: nothing says how the device booted',
    );
  }
  const described = root
    ? `deviceLocked ${root.deviceLocked}, verifiedBootState ${root.verifiedBootState}`
    : 'no hardware-enforced rootOfTrust';
  if (policy.allowUnlocked) {
    trace.pass('android.bootState', `${described}; the package allows unlocked devices`);
  } else if (root?.deviceLocked && root.verifiedBootState === 'Verified') {
    trace.pass('android.bootState', described);
  } else if (
    root?.deviceLocked &&
    root.verifiedBootState === 'SelfSigned' &&
    (policy.bootKeys ?? []).some((k) => hex(k) === hex(root.verifiedBootKey))
  ) {
    trace.pass('android.bootState', `${described}, with a boot key the package trusts`);
  } else {
    trace.policyFailed(
      'android.bootState',
      'android_boot_state_insufficient',
      root?.deviceLocked && root.verifiedBootState === 'SelfSigned'
        ? `${described}: the OS is signed with boot key ${hex(root.verifiedBootKey)}, which the package does not list (--boot-key)`
        : `${described}: the package requires a locked device with a verified OS (or --allow-unlocked)`,
    );
  }

  trace.current('android.patchLevel');
  const maxAge = policy.maxPatchAgeMonths;
  if (maxAge === undefined || maxAge === null) {
    trace.skip('android.patchLevel', 'the package sets no maximum patch age');
  } else {
    const age = facts.osPatchLevel === null ? null : patchAgeMonths(facts.osPatchLevel, deps.now);
    if (age === null)
      trace.policyFailed(
        'android.patchLevel',
        'android_patch_level_stale',
        `the key description has no osPatchLevel; the package requires one at most ${maxAge} months old`,
      );
    else if (age > maxAge)
      trace.policyFailed(
        'android.patchLevel',
        'android_patch_level_stale',
        `osPatchLevel ${facts.osPatchLevel} is ${age} months old at ${deps.now.toISOString()}; the package allows ${maxAge}`,
      );
    else
      trace.pass(
        'android.patchLevel',
        `osPatchLevel ${facts.osPatchLevel} is ${age} months old (at most ${maxAge})`,
      );
  }
  return policy;
}
