import { X509Certificate } from 'node:crypto';
import { encodeBase64 } from '../base64.js';
import { isBytes, isMap } from '../cbor.js';
import type { HintRun } from '../hintRun.js';
import { iso, sha256, utf8 } from '../hintRun.js';
import { createMemoryAllowlist } from '../memoryStores.js';
import type { AllowlistReader, AppleAppPolicy } from '../ports.js';
import { environmentFromAaguid } from './appleEnvironment.js';
import { inspectAttestation } from './inspectAttestation.js';

/** Hints for App Attest rejections (see findHints). */
export async function appleHints(run: HintRun): Promise<void> {
  const { outcome, ctx, envelope, tokenNonce, tryWith, hints } = run;
  switch (outcome.reason) {
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

    case 'apple_platform_not_allowed': {
      const { appId, platform } = outcome.facts;
      if (!appId || !platform) break;
      const apps = await ctx.allowlist.appleApps();
      const widened = apps.map((a): AppleAppPolicy =>
        a.appId === appId ? { ...a, platforms: [] } : a,
      );
      if (await tryWith({}, { allowlist: withApple(ctx.allowlist, widened) }))
        hints.push({
          code: 'platform_not_allowed',
          message: `the key was made on ${platform}${platform === 'macOS' ? ' (its leaf carries the key access-control extension 1.2.840.113635.100.8.6)' : ' (its leaf has no key access-control extension)'} and ${appId} accepts ${apps.find((a) => a.appId === appId)?.platforms?.join(', ') ?? 'other platforms'} only; the rest passes with "attest allowlist add apple ${appId} --platforms ios,macos"`,
        });
      break;
    }

    case 'apple_environment_not_allowed': {
      const { appId, environment } = outcome.facts;
      if (!appId || !environment) break;
      if (outcome.facts.platform === 'macOS' && environment === 'Production')
        hints.push({
          code: 'mac_development_aaguid',
          message:
            'a macOS key with the production AAGUID: Mac development builds may show the production AAGUID ("appattest" and seven zero bytes) although they are signed for development, so on the Mac the environment does not tell a development build; allow the app both environments while developing (--env any) and tell builds apart another way',
        });
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

    default:
      break;
  }
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
