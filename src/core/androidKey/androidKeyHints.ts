import type { HintRun } from '../hintRun.js';
import { encodeBase64 } from '../base64.js';
import { sha256, utf8, withAndroid } from '../hintRun.js';

/** Hints for Android key attestation rejections (see findHints). */
export async function androidKeyHints(run: HintRun): Promise<void> {
  const { outcome, ctx, tokenNonce, tryWith, hints } = run;
  switch (outcome.reason) {
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

    case 'android_security_level_mismatch':
      hints.push({
        code: 'level_claim_mismatch',
        message: /StrongBox/.test(outcome.detail)
          ? "the key description's security level is not the one the certificates above it state: a key description that says StrongBox under a certificate issued for a TEE is a compromised or misreporting TEE (only the certificate's subject, written by Google or the factory, is proof); a genuine StrongBox key chains through a StrongBox certificate"
          : "the key description's attestation and KeyMint security levels differ, or the certificates above it state another level: one secure element makes and attests a key, so the description cannot be trusted",
      });
      break;

    case 'android_patch_level_future':
      hints.push({
        code: 'patch_future',
        message: `the key description states a patch level months after the verification time${outcome.facts.osPatchLevel ? ` (osPatchLevel ${outcome.facts.osPatchLevel})` : ''}: a forged description, a broken build, or (for verify-file) an --at before the capture was made; preview builds run at most two months ahead`,
      });
      break;

    case 'android_assertion_replayed':
      hints.push({
        code: 'assertion_replayed',
        message:
          'this very assertion (the same key signing the same final nonce) was accepted before, at the time the detail gives: a captured request sent again, or a client that retried a verify that had already succeeded; an app makes a new assertion over a new nonce (init) for every verify',
      });
      break;

    case 'android_key_not_generated':
      hints.push({
        code: 'key_not_generated',
        message:
          'the key was imported into Keystore (or derived), not generated in the secure hardware: its private key existed outside it, so an attestation of it proves nothing about who holds it; generate the key on the device (KeyPairGenerator with setAttestationChallenge)',
      });
      break;

    default:
      break;
  }
}
