import type { CheckId } from '../checkTitles.js';
import { POLICY_CHECKS } from './keyPolicy.js';

export type AndroidKeyShape = 'registration' | 'assertion';

/** The ordered check ids of each shape (stable: `verify-file` prints them). */
export const ANDROID_KEY_CHECKS: Readonly<Record<AndroidKeyShape, readonly CheckId[]>> = {
  registration: [
    'android.shape',
    'android.certificates',
    'android.chain',
    'android.levelClaim',
    'android.revocation',
    'android.challenge',
    'android.keyId',
    'android.origin',
    'android.patchFuture',
    ...POLICY_CHECKS,
    'android.issuerVelocity',
    'android.register',
    'android.deviceVelocity',
  ],
  assertion: [
    'android.shape',
    'android.signature',
    ...POLICY_CHECKS,
    'android.replay',
    'android.deviceVelocity',
  ],
};
