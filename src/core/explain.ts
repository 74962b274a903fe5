/**
 * Hints for `verify-file`: after a rejection, re-run the verification with the alternative that a
 * common integration mistake would produce, and name the mistake only when that re-run gets
 * further. Nothing here guesses; every hint is backed by a verification that progressed.
 */
import { createHash, X509Certificate } from 'node:crypto';
import { encodeBase64, encodeBase64Url } from './base64.js';
import { isBytes, isMap } from './cbor.js';
import { environmentFromAaguid } from './apple/appleEnvironment.js';
import { inspectAttestation } from './apple/inspectAttestation.js';
import { findDecryptingPackage } from './google/findDecryptingPackage.js';
import { createMemoryAllowlist } from './memoryStores.js';
import type {
  AllowlistReader,
  AndroidPackagePolicy,
  AppleAppPolicy,
  VerifyOutcome,
} from './types.js';
import { bytesEqual, parseEnvelope, type VerifyInput } from './verify.js';

export interface Hint {
  /** stable code (documented in the README) */
  code:
    | 'nonce_base64_text'
    | 'nonce_hashed_by_device'
    | 'device_nonce_missing'
    | 'device_nonce_not_used'
    | 'raw_nonce_as_client_data_hash'
    | 'environment_not_allowed'
    | 'team_id_mismatch'
    | 'app_not_allowlisted'
    | 'other_package_keys'
    | 'token_age'
    | 'leaf_expired'
    | 'counter_replay'
    | 'test_keys_only'
    | 'verdict_not_opted_in'
    | 'not_licensed'
    | 'play_protect_risk'
    | 'app_access_risk'
    | 'device_activity_high'
    | 'challenge_derivation'
    | 'software_key'
    | 'emulator'
    | 'unknown_root'
    | 'device_unlocked'
    | 'self_signed_os'
    | 'certificate_revoked'
    | 'patch_stale';
  message: string;
}

export interface ExplainContext {
  input: VerifyInput;
  at: Date;
  /** the session parts, when the nonce was given as --server-nonce/--device-nonce */
  serverNonce?: Uint8Array;
  deviceNonce?: Uint8Array;
  allowlist: AllowlistReader;
  /** runs the same verification read-only, optionally with another allowlist or instant */
  run(
    input: VerifyInput,
    options?: { allowlist?: AllowlistReader; at?: Date },
  ): Promise<VerifyOutcome>;
}

type Rejected = Extract<VerifyOutcome, { ok: false }>;

const sha256 = (b: Uint8Array) => new Uint8Array(createHash('sha256').update(b).digest());
const utf8 = (s: string) => new Uint8Array(Buffer.from(s, 'utf8'));

/** Hints for a rejection, each confirmed by a re-run that got past the failing check. */
export async function findHints(outcome: Rejected, ctx: ExplainContext): Promise<Hint[]> {
  const hints: Hint[] = [];
  const progressed = (retry: VerifyOutcome) => retry.ok || failedAt(retry) > failedAt(outcome);
  const tryWith = async (
    input: Partial<VerifyInput>,
    options?: { allowlist?: AllowlistReader; at?: Date },
  ) => progressed(await ctx.run({ ...ctx.input, ...input }, options));

  let envelope: ReturnType<typeof parseEnvelope> | null = null;
  try {
    envelope = parseEnvelope(ctx.input.token);
  } catch {
    return hints; // nothing to re-try on a token that does not parse
  }
  const tokenNonce = envelope.nonce;

  switch (outcome.reason) {
    case 'nonce_mismatch': {
      const expected = ctx.input.expectedNonce;
      if (!expected) break;
      for (const text of [encodeBase64(expected), encodeBase64Url(expected)]) {
        if (await tryWith({ expectedNonce: utf8(text) })) {
          hints.push({
            code: 'nonce_base64_text',
            message:
              'the token nonce is the base64 text of the final nonce: the device must decode the base64 it receives and use the bytes',
          });
          break;
        }
      }
      if (await tryWith({ expectedNonce: sha256(expected) })) {
        hints.push({
          code: 'nonce_hashed_by_device',
          message:
            'the token nonce is SHA-256 of the final nonce: the device must put the final nonce itself in the token (only App Attest hashes it, as clientDataHash)',
        });
      }
      if (
        ctx.serverNonce &&
        ctx.deviceNonce &&
        (await tryWith({ expectedNonce: ctx.serverNonce }))
      ) {
        hints.push({
          code: 'device_nonce_not_used',
          message:
            'the token was made over the server nonce alone: the device did not append the device nonce that was passed to verify',
        });
      }
      if (
        ctx.serverNonce &&
        !ctx.deviceNonce &&
        tokenNonce.length > ctx.serverNonce.length &&
        bytesEqual(tokenNonce.subarray(0, ctx.serverNonce.length), ctx.serverNonce)
      ) {
        if (await tryWith({ expectedNonce: tokenNonce })) {
          hints.push({
            code: 'device_nonce_missing',
            message: `the token nonce is the server nonce followed by ${tokenNonce.length - ctx.serverNonce.length} more bytes: the device used a device nonce that was not passed to verify (deviceNonce / --device-nonce)`,
          });
        }
      }
      break;
    }

    case 'apple_nonce_mismatch':
    case 'apple_signature_invalid': {
      if (await tryWith({ clientDataHash: tokenNonce })) {
        hints.push({
          code: 'raw_nonce_as_client_data_hash',
          message: 'the device passed the raw nonce as clientDataHash: it must pass SHA-256(nonce)',
        });
        break;
      }
      const text = utf8(encodeBase64(tokenNonce));
      if (
        (await tryWith({ clientDataHash: sha256(text) })) ||
        (await tryWith({ clientDataHash: text }))
      ) {
        hints.push({
          code: 'nonce_base64_text',
          message:
            'the device hashed the base64 text of the nonce: it must decode the base64 and hash the bytes, clientDataHash = SHA-256(nonce)',
        });
      }
      break;
    }

    case 'apple_environment_not_allowed': {
      const { appId, environment } = outcome.facts;
      if (!appId || !environment) break;
      const apps = await ctx.allowlist.appleApps();
      const widened = apps.map((a): AppleAppPolicy =>
        a.appId === appId ? { appId, env: 'any' } : a,
      );
      const policy = apps.find((a) => a.appId === appId)?.env ?? 'none';
      if (await tryWith({}, { allowlist: withApple(ctx.allowlist, widened) })) {
        hints.push({
          code: 'environment_not_allowed',
          message: `the key is a ${environment} App Attest key but ${appId} allows ${policy} only: a ${environment === 'Development' ? 'debug build (App Attest development entitlement)' : 'production build'} against this policy; fix the build's entitlement or "attest allowlist add apple ${appId} --env any"`,
        });
      }
      break;
    }

    case 'apple_app_not_allowed': {
      const claimed = attestedAppId(envelope.evidence);
      const apps = await ctx.allowlist.appleApps();
      if (!claimed) {
        // an assertion for a registered key: confirmed only when the key's app, allowed in either
        // environment, gets past the check (an assertion whose rpIdHash is another app's does not)
        const { appId, environment } = outcome.facts;
        if (!appId) break;
        const listed = apps.find((a) => a.appId === appId);
        const widened = [...apps.filter((a) => a.appId !== appId), { appId, env: 'any' as const }];
        if (!(await tryWith({}, { allowlist: withApple(ctx.allowlist, widened) }))) break;
        hints.push(
          listed
            ? {
                code: 'environment_not_allowed',
                message: `the key is a ${environment ?? '?'} App Attest key registered for ${appId}, which now allows ${listed.env} keys only; fix the build's entitlement or "attest allowlist add apple ${appId} --env any"`,
              }
            : {
                code: 'app_not_allowlisted',
                message: `the key was registered for ${appId}, which is no longer on the allowlist`,
              },
        );
        break;
      }
      const env = environmentOf(envelope.evidence);
      if (
        !(await tryWith(
          {},
          { allowlist: withApple(ctx.allowlist, [...apps, { appId: claimed, env: 'any' }]) },
        ))
      )
        break;
      const bundle = claimed.slice(claimed.indexOf('.') + 1);
      const sameBundle = apps.find((a) => a.appId.slice(a.appId.indexOf('.') + 1) === bundle);
      hints.push(
        sameBundle
          ? {
              code: 'team_id_mismatch',
              message: `the attestation is for ${claimed}, but the allowlist has ${sameBundle.appId}: same bundle ID, different team ID`,
            }
          : {
              code: 'app_not_allowlisted',
              message: `the attestation is for ${claimed}${env ? ` (${env})` : ''}, which is not on the allowlist`,
            },
      );
      break;
    }

    case 'apple_chain_invalid': {
      const attestation = isMap(envelope.evidence)
        ? envelope.evidence.get('attestation')
        : undefined;
      if (!isBytes(attestation)) break;
      let validity;
      try {
        validity = inspectAttestation(attestation).leafValidity;
      } catch {
        break;
      }
      if (!validity) break;
      const { notBefore, notAfter } = validity;
      if (ctx.at >= notBefore && ctx.at <= notAfter) break;
      const inside = new Date((notBefore.getTime() + notAfter.getTime()) / 2);
      if (await tryWith({}, { at: inside })) {
        hints.push({
          code: 'leaf_expired',
          message: `the leaf certificate is valid from ${iso(notBefore)} to ${iso(notAfter)}, and the chain verifies inside that period: the attestation ${ctx.at > notAfter ? 'is old (verify attestations as they arrive)' : 'is dated after the verification instant (clock?)'}; re-run with --at ${iso(inside)} to check the rest`,
        });
      }
      break;
    }

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

    case 'apple_counter_replay': {
      // not an integration mistake to confirm by a re-run: what the two counters say, for the analyst
      const { counter, storedCounter, keyId } = outcome.facts;
      if (counter === undefined || storedCounter === undefined) break;
      const look = `list this key's requests with: attest logs LOG --json | jq 'select(.keyId == "${keyId ?? 'KEY_ID'}")'`;
      const message =
        counter === 0 && storedCounter === 0
          ? 'the assertion counter is 0: App Attest counts assertions from 1, so this is not an assertion the device made with this key after its attestation (a forged or test assertion)'
          : counter === storedCounter
            ? `the assertion's counter ${counter} is the one already accepted for this key: usually a replayed request (the same assertion sent again by an attacker, or re-sent by a client retry); ${look}`
            : `the assertion's counter ${counter} is below the ${storedCounter} already accepted for this key: an older assertion replayed, or a cloned key (a second device or an emulator using a copy of the key, so two counters interleave); ${look}`;
      hints.push({ code: 'counter_replay', message });
      break;
    }
    case 'gms_not_licensed':
    case 'gms_play_protect':
    case 'gms_app_access_risk':
    case 'gms_device_activity': {
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

    case 'android_challenge_mismatch': {
      // what a device that skipped or doubled the hash, or hashed the base64 text, would have set
      const text = utf8(encodeBase64(tokenNonce));
      const tries: [Uint8Array, string][] = [
        [tokenNonce, 'the nonce itself: it must pass SHA-256(nonce)'],
        [sha256(text), 'SHA-256 of the base64 text of the nonce: it must hash the decoded bytes'],
        [text, 'the base64 text of the nonce: it must pass SHA-256 of the decoded bytes'],
        [sha256(sha256(tokenNonce)), 'SHA-256 twice: it must hash the nonce once'],
      ];
      for (const [challenge, what] of tries) {
        if (await tryWith({ challenge })) {
          hints.push({
            code: 'challenge_derivation',
            message: `the device called setAttestationChallenge with ${what}`,
          });
          break;
        }
      }
      break;
    }

    case 'android_chain_invalid': {
      const f = outcome.facts;
      if (f.chainRoot === 'aosp-software') {
        hints.push(
          f.emulator
            ? {
                code: 'emulator',
                message:
                  'the key was attested by an Android emulator (its attested product or model says so): emulators have no secure hardware and chain to the AOSP software root; test on a real device, or use "attest dev mint android-key" with a test API key',
              }
            : {
                code: 'software_key',
                message: `the chain ends at the AOSP software attestation root, whose private key is public: the key was made by Keystore in software${f.securityLevel === 'Software' ? ' (the key description says Software)' : ''}, on an emulator or a device without a TEE; such keys prove nothing`,
              },
        );
      } else if (/unknown root/.test(outcome.detail)) {
        hints.push({
          code: 'unknown_root',
          message:
            "the chain ends at a key that is neither Google's RSA-4096 attestation root nor Key Attestation CA1: a device with a vendor or custom-ROM root, a chain built by hand, or a deployment whose ATTEST_ANDROID_ROOT_CA does not hold the test CA that made it",
        });
      }
      break;
    }

    case 'android_security_level_insufficient': {
      if (outcome.facts.securityLevel === 'Software')
        hints.push({
          code: 'software_key',
          message:
            'the key description says Software: the key lives outside the TEE and StrongBox (Keystore fell back to software), so it proves nothing about the device',
        });
      break;
    }

    case 'android_boot_state_insufficient': {
      const name = outcome.facts.packageName;
      const policy = name ? await ctx.allowlist.androidPackage(name) : null;
      if (!policy) break;
      if (
        !(await tryWith(
          {},
          { allowlist: withAndroid(ctx.allowlist, { ...policy, allowUnlocked: true }) },
        ))
      )
        break;
      const { deviceLocked, verifiedBootState } = outcome.facts;
      hints.push(
        deviceLocked && verifiedBootState === 'SelfSigned'
          ? {
              code: 'self_signed_os',
              message:
                'the device is locked but runs an OS signed with its own key (GrapheneOS and the like): list that OS with --boot-key (the verifiedBootKey in the detail); the rest passes',
            }
          : {
              code: 'device_unlocked',
              message: `the device's bootloader is ${deviceLocked ? 'locked' : 'unlocked'} and its boot state ${verifiedBootState ?? 'unknown'}: a development or rooted device; the rest passes with --allow-unlocked`,
            },
      );
      break;
    }

    case 'android_chain_revoked': {
      hints.push({
        code: 'certificate_revoked',
        message: `Google revoked certificate ${outcome.facts.revokedSerial ?? '?'} of the chain (its attestation key leaked, or the device batch is compromised): keys it certified cannot be trusted, whatever the device says`,
      });
      break;
    }

    case 'android_patch_level_stale': {
      const name = outcome.facts.packageName;
      const policy = name ? await ctx.allowlist.androidPackage(name) : null;
      if (!policy) break;
      const relaxed = withAndroid(ctx.allowlist, { ...policy, maxPatchAgeMonths: null });
      if (await tryWith({}, { allowlist: relaxed }))
        hints.push({
          code: 'patch_stale',
          message: `the device's security patch level is ${outcome.facts.osPatchLevel ?? 'unknown'}, older than the package allows (--max-patch-age): an outdated device; the rest passes`,
        });
      break;
    }

    default:
      break;
  }
  return hints;
}

/** How each newer-verdict rejection is re-tried: the package policy with that requirement off. */
const VERDICT_HINTS: Record<
  'gms_not_licensed' | 'gms_play_protect' | 'gms_app_access_risk' | 'gms_device_activity',
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
};

function withAndroid(base: AllowlistReader, policy: AndroidPackagePolicy): AllowlistReader {
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

function failedAt(outcome: VerifyOutcome): number {
  return outcome.ok
    ? Number.POSITIVE_INFINITY
    : outcome.checks.findIndex((c) => c.status === 'fail');
}

function withApple(base: AllowlistReader, apple: AppleAppPolicy[]): AllowlistReader {
  const override = createMemoryAllowlist({ apple });
  return { ...base, appleApp: override.appleApp, appleApps: override.appleApps };
}

/** The app ID Apple writes in clear into the leaf (extension 1.2.840.113635.100.8.5); hint-only. */
function attestedAppId(evidence: unknown): string | null {
  if (!isMap(evidence)) return null;
  const attestation = evidence.get('attestation');
  if (!isBytes(attestation)) return null;
  try {
    const leaf = new X509Certificate(inspectAttestation(attestation).x5c[0]!);
    const text = leaf.raw.toString('latin1');
    // the value is confirmed by re-running the verification with it, never trusted as such
    // `_` too: Apple's own sample app ID is 0352187391.com.apple.example_app_attest
    return /([A-Z0-9]{10}\.[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)+)/.exec(text)?.[1] ?? null;
  } catch {
    return null;
  }
}

function environmentOf(evidence: unknown): string | null {
  if (!isMap(evidence)) return null;
  const attestation = evidence.get('attestation');
  if (!isBytes(attestation)) return null;
  try {
    return environmentFromAaguid(inspectAttestation(attestation).authData.aaguid);
  } catch {
    return null;
  }
}

function iso(d: Date): string {
  return d.toISOString().replace('.000Z', 'Z');
}
