import type { Command } from 'commander';
import {
  ANDROID_KEY_POLICY_FIELDS,
  type AndroidKeyRules,
} from '../../../core/androidKey/androidKeyPolicyFields.js';
import { describePolicy } from '../../../core/policyFields.js';
import type { AndroidPolicyInput } from '../../../db/androidPackageRows.js';
import { addPolicyOptions, policyOptions } from '../policyOptions.js';

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
  return addPolicyOptions(command, ANDROID_KEY_POLICY_FIELDS);
}

/** The flags as policy fields; a flag not given leaves the stored value. */
export function keyAttestationPolicy(opts: KeyAttestationFlags): AndroidPolicyInput {
  return policyOptions<AndroidPolicyInput>(ANDROID_KEY_POLICY_FIELDS, opts);
}

/** `allowlist list`'s words for a package's key attestation policy. */
export function keyAttestationSummary(p: AndroidKeyRules): string {
  if (!p.keyAttestation) return '';
  return `; key attestation: ${describePolicy(ANDROID_KEY_POLICY_FIELDS, p).join(', ')}`;
}
