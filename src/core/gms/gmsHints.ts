import { isMap } from '../cbor.js';
import type { Hint } from '../explain.js';
import type { HintRun } from '../hintRun.js';
import { iso, withAndroid } from '../hintRun.js';
import type { AndroidPackagePolicy } from '../ports.js';
import { findDecryptingPackage } from './findDecryptingPackage.js';

/** Hints for Play Integrity rejections (see findHints). */
export async function gmsHints(run: HintRun): Promise<void> {
  const { outcome, ctx, envelope, tryWith, hints } = run;
  switch (outcome.reason) {
    case 'gms_decrypt_failed': {
      const evidence = envelope.evidence;
      if (!isMap(evidence)) break;
      const token = evidence.get('integrityToken');
      const claimed = evidence.get('packageName');
      if (typeof token !== 'string') break;
      const others = (await ctx.allowlist.androidPackages()).filter(
        (p) => p.packageName !== claimed,
      );
      const owner = await findDecryptingPackage(token, others);
      if (owner) {
        hints.push({
          code: 'other_package_keys',
          message: `the integrity token was encrypted with the keys of ${owner}, not of ${String(claimed)}: the app requested it under another Cloud project / package`,
        });
      }
      break;
    }

    case 'gms_token_stale': {
      const issued = outcome.facts.issuedAt ? new Date(outcome.facts.issuedAt) : null;
      if (!issued || Number.isNaN(issued.getTime())) break;
      if (await tryWith({}, { at: issued })) {
        const seconds = Math.round((ctx.at.getTime() - issued.getTime()) / 1000);
        hints.push({
          code: 'token_age',
          message: `the token was issued at ${iso(issued)}, ${Math.abs(seconds)} s ${seconds >= 0 ? 'before' : 'after'} the verification instant ${iso(ctx.at)}, and passes at its issue time: ${seconds >= 0 ? 'it is old (a replay, or a slow round trip)' : 'a clock is off'}; re-run with --at to check the rest`,
        });
      }
      break;
    }

    case 'gms_not_licensed':
    case 'gms_play_protect':
    case 'gms_app_access_risk':
    case 'gms_device_activity':
    case 'gms_device_recalled':
    case 'gms_account_activity':
    case 'gms_location_spoofing': {
      const name = outcome.facts.packageName;
      const policy = name ? await ctx.allowlist.androidPackage(name) : null;
      if (!policy) break;
      const relax = VERDICT_HINTS[outcome.reason];
      if (!(await tryWith({}, { allowlist: withAndroid(ctx.allowlist, relax.relaxed(policy)) })))
        break;
      const missing = outcome.facts.missingVerdict;
      hints.push(
        missing
          ? {
              code: 'verdict_not_opted_in',
              message: `Google sent no usable ${missing}: the verdict is not turned on for the app in the Play Console (or was not evaluated on this device), and the package requires it (${relax.flag}); the rest passes without that requirement`,
            }
          : {
              code: relax.code,
              message: `${relax.message} (${relax.flag}); the rest passes without that requirement`,
            },
      );
      break;
    }

    default:
      break;
  }
}

/** How each newer-verdict rejection is re-tried: the package policy with that requirement off. */
const VERDICT_HINTS: Record<
  | 'gms_not_licensed'
  | 'gms_play_protect'
  | 'gms_app_access_risk'
  | 'gms_device_activity'
  | 'gms_device_recalled'
  | 'gms_account_activity'
  | 'gms_location_spoofing',
  {
    code: Hint['code'];
    flag: string;
    message: string;
    relaxed: (p: AndroidPackagePolicy) => AndroidPackagePolicy;
  }
> = {
  gms_not_licensed: {
    code: 'not_licensed',
    flag: '--require-licensed',
    message:
      "the user's copy of the app is not licensed by Google Play (sideloaded, or not bought on this account)",
    relaxed: (p) => ({ ...p, requireLicensed: false }),
  },
  gms_play_protect: {
    code: 'play_protect_risk',
    flag: '--require-play-protect',
    message: 'Play Protect is off on the device or found risky apps',
    relaxed: (p) => ({ ...p, playProtectVerdicts: [] }),
  },
  gms_app_access_risk: {
    code: 'app_access_risk',
    flag: '--deny-app-access-risk',
    message:
      'an app that can capture the screen, control the device or draw overlays is running, of a kind the package denies',
    relaxed: (p) => ({ ...p, denyAppAccessRisk: [] }),
  },
  gms_device_activity: {
    code: 'device_activity_high',
    flag: '--max-device-activity',
    message:
      'the device asked for more integrity tokens recently than the package allows (automation or a token farm, or a legitimate heavy user)',
    relaxed: (p) => ({ ...p, maxDeviceActivity: null }),
  },
  gms_device_recalled: {
    code: 'device_recalled',
    flag: '--deny-recall-bits',
    message:
      "the app's backend marked this device with a Play device recall bit the package denies (POST /api/v1/android/device-recall, or dev mint gms --recall); the mark survives a reset and reinstall",
    relaxed: (p) => ({ ...p, denyRecallBits: [] }),
  },
  gms_account_activity: {
    code: 'account_activity_low',
    flag: '--min-account-activity',
    message:
      "the Play account activity on the device is below the package's minimum (a new account, unusual store activity, or accounts of a device farm)",
    relaxed: (p) => ({ ...p, minAccountActivity: null }),
  },
  gms_location_spoofing: {
    code: 'location_spoofing_risk',
    flag: '--deny-location-spoofing',
    message:
      'Google reports a location spoofing risk on the device (a mock-location app, or a location that does not fit the network) of a kind the package denies',
    relaxed: (p) => ({ ...p, denyLocationSpoofing: [] }),
  },
};
