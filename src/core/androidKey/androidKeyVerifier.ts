/**
 * The Android hardware key attestation verifier (`device.service` `android-key`): reads the
 * evidence map, picks the shape from what the token carries and whether its key is registered,
 * runs the registration checks 1 to 9 or the assertion checks (signature, then 6 to 9 against the
 * stored facts), and registers a key with one atomic insert (two racing requests cannot both win).
 */
import {
  createHash,
  createPublicKey,
  verify as verifySignature,
  type KeyObject,
} from 'node:crypto';
import { encodeBase64 } from '../base64.js';
import { checkDeviceVelocity } from '../deviceVelocity.js';
import type { CheckId } from '../checkTitles.js';
import { LruCache } from '../lruCache.js';
import { StoredKeyCache } from '../storedKeyCache.js';
import { ownBytes } from '../ownBytes.js';
import { Rejection } from '../reasons.js';
import type {
  AllowlistReader,
  AndroidKeyRecord,
  AndroidKeyStore,
  AndroidPackagePolicy,
  DeviceVelocityStore,
  KeyMode,
  PlatformContext,
  PlatformVerifier,
  RevocationList,
} from '../ports.js';
import type { PlatformDetails } from '../kinds.js';
import type { AndroidKeyExtras, AndroidProvisioningInfo } from './androidKeyTokenDetails.js';
import { bytesEqual } from '../bytesEqual.js';
import {
  NAME_OIDS,
  readAttestationCertificate,
  serialHex,
  type AttestationCertificate,
} from './attestationCertificate.js';
import {
  createAttestationChainVerifier,
  MAX_CHAIN_LENGTH,
  PROVISIONING_INFO_OID,
} from './attestationChain.js';
import { chainLevelClaim, levelClaimProblem } from './chainSecurityLevel.js';
import {
  KEY_DESCRIPTION_OID,
  KNOWN_ATTESTATION_VERSIONS,
  parseKeyDescription,
  type KeyDescription,
} from './keyDescription.js';
import { futurePatchLevels } from './patchLevels.js';
import { readProvisioningInfo } from './provisioningInfo.js';
import { checkKeyPolicy, lowerLevel, POLICY_CHECKS, type AttestedFacts } from './keyPolicy.js';
import { details } from './androidKeyDetails.js';
import { KEY_ORIGIN_GENERATED, ORIGINS, serialsOf } from './keyOrigins.js';
import { REJECTING_STATUSES } from './revocationList.js';
import type { AndroidRootKey } from './trustRoots.js';

import { ANDROID_KEY_CHECKS, type AndroidKeyShape } from './androidKeyChecks.js';

import { readAndroidKeyEvidence, type AndroidKeyEvidence } from './androidKeyEvidence.js';
import { guardAssertionReplay } from './assertionReplay.js';
import { checkIssuerVelocity, type IssuerVelocityStore } from './issuerVelocity.js';
import { checkIssuerBlocklist } from './issuerBlocklist.js';

/** A key whose checks all passed, with the package entry they were checked against. */
type Verified = { record: AndroidKeyRecord; policy: AndroidPackagePolicy };

/** All certificates of a chain together: real chains hold 2 to 5.4 KB. */
export const MAX_CHAIN_BYTES = 24 * 1024;
const EMULATOR = /\b(sdk|emulator|generic|ranchu|goldfish|gphone)/i;

export interface AndroidKeyVerifierDeps {
  /** trusted root keys: `defaultAndroidRoots()` unless a deployment replaces them */
  roots: readonly AndroidRootKey[];
  allowlist: AllowlistReader;
  keys: AndroidKeyStore;
  /** the current status list (the database's, or the shipped snapshot) */
  revocations: () => RevocationList | Promise<RevocationList>;
  /** the mode of the API key verifying (default live): test-registered keys are refused to live keys */
  mode?: KeyMode;
  /** parsed public keys kept per key id, most recently used; default ANDROID_KEY_CACHE_SIZE */
  keyCacheSize?: number;
  /** per-device verify counts, shared by every instance; needed once a package sets a limit */
  velocity?: DeviceVelocityStore;
  /** new keys per issuing certificate, shared by every instance; absent (verify-file): not counted */
  issuers?: IssuerVelocityStore;
  /** the deployment's blocked issuing-certificate serials (normalizeSerial); absent: none */
  blockedIssuers?: () => ReadonlySet<string> | Promise<ReadonlySet<string>>;
}

/**
 * Public keys a verifier keeps for assertions: a P-256 KeyObject holds about 2.9 KB of OpenSSL
 * memory (an RSA one more), so 2 000 cost ~6 MB per verifier; a miss costs one createPublicKey.
 */
export const ANDROID_KEY_CACHE_SIZE = 2000;

/** The facts a key description gives the policy and the store. */
function attestedFacts(description: KeyDescription): AttestedFacts {
  return {
    attestedPackages: description.applicationId?.packages.map((p) => p.name) ?? null,
    signatureDigests: description.applicationId?.signatureDigests ?? [],
    attestationSecurityLevel: description.attestationSecurityLevel,
    keyMintSecurityLevel: description.keyMintSecurityLevel,
    rootOfTrust: description.rootOfTrust,
    osPatchLevel: description.osPatchLevel,
  };
}

function storedFacts(record: AndroidKeyRecord): AttestedFacts {
  return {
    attestedPackages: [record.packageName],
    signatureDigests: record.signatureDigests,
    attestationSecurityLevel: record.attestationSecurityLevel,
    keyMintSecurityLevel: record.keyMintSecurityLevel,
    rootOfTrust: {
      deviceLocked: record.deviceLocked,
      verifiedBootState: record.verifiedBootState,
      verifiedBootKey: record.verifiedBootKey,
    },
    osPatchLevel: record.osPatchLevel,
  };
}

/**
 * Whether assertions can be checked with the leaf's key: EC P-256, or RSA of 2048 to 4096 bits
 * with exponent 65537 (what Keystore makes; a larger modulus or exponent would make every later
 * assertion of the key cost many times a normal one). OpenSSL decoded the key when it read the certificate (from the same SPKI bytes): reading it
 * again from DER would cost as much as three P-256 signature checks.
 */
function supportedKey(
  leaf: AttestationCertificate,
): { ok: true; key: KeyObject } | { ok: false; what: string } {
  let key: KeyObject;
  try {
    key = leaf.cert.publicKey;
  } catch {
    try {
      key = createPublicKey({ key: leaf.spki, format: 'der', type: 'spki' });
    } catch {
      return { ok: false, what: 'a key type this service cannot read (ML-DSA?)' };
    }
  }
  const details = key.asymmetricKeyDetails ?? {};
  if (key.asymmetricKeyType === 'ec' && details.namedCurve === 'prime256v1')
    return { ok: true, key };
  const bits = details.modulusLength ?? 0;
  if (key.asymmetricKeyType === 'rsa' && bits >= 2048 && bits <= 4096) {
    if (details.publicExponent === 65537n) return { ok: true, key };
    return { ok: false, what: `rsa ${bits} with a public exponent other than 65537` };
  }
  return {
    ok: false,
    what: `${key.asymmetricKeyType ?? 'unknown'} ${details.namedCurve ?? details.modulusLength ?? ''}`.trim(),
  };
}

/**
 * Builds the Android key attestation verifier.
 * @param deps root keys, allowlist, key store, status list and mode
 */
export function createAndroidKeyVerifier(deps: AndroidKeyVerifierDeps): PlatformVerifier {
  const chainVerifier = createAttestationChainVerifier(deps.roots);
  const { allowlist, keys } = deps;
  const mode = deps.mode ?? 'live';
  const storedKeys = new StoredKeyCache(deps.keyCacheSize ?? ANDROID_KEY_CACHE_SIZE, 'Android');

  // Issuing certificates are shared by many devices and cost milliseconds to read (two parsers):
  // each is read once, by the SHA-256 of its bytes. The leaf is read every time.
  const issuingCerts = new LruCache<string, AttestationCertificate>(256);
  function issuing(der: Uint8Array, i: number): AttestationCertificate {
    const key = createHash('sha256').update(der).digest('hex');
    const cached = issuingCerts.get(key);
    if (cached) return cached;
    const cert = readAttestationCertificate(der, `certificateChain[${i}]`);
    issuingCerts.set(key, cert);
    return cert;
  }

  const publicKeyOf = (record: { keyId: Uint8Array; publicKey: Uint8Array }): KeyObject =>
    storedKeys.publicKeyOf(record);

  async function assertion(
    record: AndroidKeyRecord,
    evidence: AndroidKeyEvidence,
    ctx: PlatformContext,
  ): Promise<Verified> {
    const { trace } = ctx;
    begin(ctx, 'assertion');
    describe(ctx, record);
    trace.current('android.signature');
    let valid = false;
    try {
      valid = verifySignature('sha256', ctx.nonce, publicKeyOf(record), evidence.signature!);
    } catch {
      valid = false; // a signature that is not even DER
    }
    if (!valid)
      throw new Rejection(
        'android_signature_invalid',
        'the signature over the final nonce does not verify with the registered key',
      );
    trace.pass('android.signature', 'the signature over the final nonce verifies with the key');
    if (evidence.packageName !== record.packageName) {
      trace.current('android.package');
      throw new Rejection(
        'android_package_not_allowed',
        `the key was registered for "${record.packageName}", not "${evidence.packageName}"`,
      );
    }
    const policy = await checkKeyPolicy(record.packageName, storedFacts(record), {
      allowlist,
      trace,
      now: ctx.now,
      appScope: ctx.appScope,
    });
    await guardAssertionReplay(keys, record.keyId, { nonce: ctx.nonce, mode, now: ctx.now }, trace);
    return { record, policy };
  }

  async function registration(
    evidence: AndroidKeyEvidence,
    ctx: PlatformContext,
  ): Promise<Verified> {
    const { trace } = ctx;
    begin(ctx, 'registration');
    const chain = evidence.certificateChain!;

    trace.current('android.certificates');
    const total = chain.reduce((sum, der) => sum + der.length, 0);
    if (total > MAX_CHAIN_BYTES)
      throw new Rejection(
        'android_key_malformed',
        `certificateChain holds ${total} bytes: more than any attestation chain (${MAX_CHAIN_BYTES})`,
      );
    const certs = chain.map((der, i) =>
      i === 0 ? readAttestationCertificate(der, 'certificateChain[0]') : issuing(der, i),
    );
    const leaf = certs[0]!;
    const values = leaf.extensions.get(KEY_DESCRIPTION_OID) ?? [];
    if (values.length !== 1)
      throw new Rejection(
        'android_key_malformed',
        values.length === 0
          ? 'the leaf has no key description extension (1.3.6.1.4.1.11129.2.1.17): not an attestation certificate'
          : 'the leaf carries the key description extension more than once',
      );
    const description = parseKeyDescription(values[0]!);
    // Google's remote provisioning server writes it into the attestation certificate it issues
    let provisioningInfo: AndroidProvisioningInfo | null = null;
    for (let i = 1; i < certs.length && !provisioningInfo; i++) {
      const info = certs[i]!.extensions.get(PROVISIONING_INFO_OID);
      if (!info) continue;
      if (info.length !== 1)
        throw new Rejection(
          'android_key_malformed',
          `certificateChain[${i}] carries the provisioning information extension more than once`,
        );
      provisioningInfo = readProvisioningInfo(info[0]!, `certificateChain[${i}]`);
    }
    const lowest = lowerLevel(
      description.attestationSecurityLevel,
      description.keyMintSecurityLevel,
    );
    trace.facts.securityLevel = lowest;
    if (description.rootOfTrust) {
      trace.facts.verifiedBootState = description.rootOfTrust.verifiedBootState;
      trace.facts.deviceLocked = description.rootOfTrust.deviceLocked;
    }
    trace.facts.osPatchLevel = description.osPatchLevel;
    const ids = Object.values(description.deviceIds).join(' ');
    if (EMULATOR.test(ids)) trace.facts.emulator = true;
    trace.pass(
      'android.certificates',
      `${certs.length} DER certificate(s); KeyDescription v${description.attestationVersion}${KNOWN_ATTESTATION_VERSIONS.has(description.attestationVersion) ? '' : ' (a version this service does not know: read by the latest schema it knows)'}, ${description.attestationSecurityLevel}${description.extras.unknownTags ? `; tags carried as data: ${description.extras.unknownTags.join(', ')}` : ''}`,
    );

    trace.current('android.chain');
    const { root, provisioning, rootIncluded } = chainVerifier.verify(certs, ctx.now, (kind) => {
      trace.facts.chainRoot = kind;
    });
    trace.facts.chainRoot = root.kind;
    trace.pass(
      'android.chain',
      `${provisioning === 'remote' ? 'remotely provisioned' : 'factory'} chain to ${root.name}`,
    );

    // Google's SecurityLevelConstraint.MATCHES_CERTIFICATE and NOT_SOFTWARE's level agreement
    trace.current('android.levelClaim');
    const claim = chainLevelClaim(certs, rootIncluded);
    const levelProblem = levelClaimProblem(
      description.attestationSecurityLevel,
      description.keyMintSecurityLevel,
      claim,
    );
    if (levelProblem) throw new Rejection('android_security_level_mismatch', levelProblem);
    trace.pass(
      'android.levelClaim',
      `KeyMint ${description.keyMintSecurityLevel}; the ${claim.provisioning} chain's subjects claim ${claim.level ?? 'no level'}`,
    );

    trace.current('android.revocation');
    const list = await deps.revocations();
    certs.forEach((cert, i) => {
      // factory intermediates carry a serial number of their own in their subject, and the
      // status list may name a batch by it
      for (const [serial, where] of serialsOf(cert)) {
        const entry = list.lookup(serial);
        if (entry && REJECTING_STATUSES.has(entry.status)) {
          trace.facts.revokedSerial = serialHex(serial);
          throw new Rejection(
            'android_chain_revoked',
            `certificateChain[${i}]'s ${where} ${serialHex(serial)} is ${entry.status}${entry.reason ? ` (${entry.reason})` : ''} on the attestation status list`,
          );
        }
      }
    });
    // the operator's own blocklist: a leaked keybox refused before Google lists it
    await checkIssuerBlocklist(chain, deps.blockedIssuers);
    trace.pass(
      'android.revocation',
      `no certificate serial or subject serial is on the status list (${list.size} entries)`,
    );

    trace.current('android.challenge');
    const expected = ctx.challenge ?? createHash('sha256').update(ctx.nonce).digest();
    if (!bytesEqual(description.attestationChallenge, expected))
      throw new Rejection(
        'android_challenge_mismatch',
        `attestationChallenge (${description.attestationChallenge.length} bytes) is not ${ctx.challenge ? 'the given challenge' : 'SHA-256(final nonce)'}`,
      );
    trace.pass(
      'android.challenge',
      ctx.challenge
        ? 'attestationChallenge equals the given challenge'
        : 'attestationChallenge equals SHA-256(final nonce)',
    );

    trace.current('android.keyId');
    if (!bytesEqual(createHash('sha256').update(leaf.spki).digest(), evidence.keyId))
      throw new Rejection(
        'android_key_id_mismatch',
        'keyId is not SHA-256 of the leaf SubjectPublicKeyInfo',
      );
    const supported = supportedKey(leaf);
    if (!supported.ok)
      throw new Rejection(
        'android_key_unsupported',
        `the attested key is ${supported.what}: assertions need EC P-256, or RSA of 2048 to 4096 bits with exponent 65537`,
      );
    trace.pass('android.keyId', `keyId matches the leaf's ${supported.key.asymmetricKeyType} key`);

    // Google's default ConstraintConfig: the key was made in the secure hardware
    trace.current('android.origin');
    if (description.origin !== KEY_ORIGIN_GENERATED)
      throw new Rejection(
        'android_key_not_generated',
        description.origin === null
          ? 'the key description has no hardware-enforced origin: it does not say the key was made in the secure hardware'
          : `the key's origin is ${ORIGINS[description.origin] ?? description.origin}, not GENERATED: its private key existed outside the secure hardware`,
      );
    trace.pass('android.origin', 'origin GENERATED (hardware-enforced)');

    trace.current('android.patchFuture');
    const future = futurePatchLevels(description, ctx.now);
    if (future.length > 0)
      throw new Rejection(
        'android_patch_level_future',
        `${future.join(', ')}: more than a month after ${ctx.now.toISOString()} (a forged or broken key description, or a clock far behind)`,
      );
    trace.pass('android.patchFuture', 'no patch level is more than a month ahead');

    const facts = attestedFacts(description);
    const policy = await checkKeyPolicy(evidence.packageName, facts, {
      allowlist,
      trace,
      now: ctx.now,
      appScope: ctx.appScope,
    });

    const record: AndroidKeyRecord = {
      keyId: ownBytes(evidence.keyId),
      publicKey: ownBytes(leaf.spki),
      packageName: evidence.packageName,
      attestationSecurityLevel: description.attestationSecurityLevel,
      keyMintSecurityLevel: description.keyMintSecurityLevel,
      // check 8 passed or is observed: without a root of trust the key reads as unverified
      verifiedBootState: description.rootOfTrust?.verifiedBootState ?? 'Unverified',
      deviceLocked: description.rootOfTrust?.deviceLocked ?? false,
      verifiedBootKey: ownBytes(description.rootOfTrust?.verifiedBootKey ?? new Uint8Array()),
      osPatchLevel: description.osPatchLevel,
      attestationVersion: description.attestationVersion,
      signatureDigests: facts.signatureDigests.map(ownBytes),
      mode,
      extras: {
        ...description.extras,
        ...(provisioningInfo ? { provisioningInfo } : {}),
      },
    };
    // last before the key is stored: only a registration that passed every other check counts
    await checkIssuerVelocity(chain, policy, { store: deps.issuers, mode, now: ctx.now, trace });
    trace.current('android.register');
    if (!(await keys.register(record)))
      throw new Rejection('android_key_registered', 'another request registered this key first');
    storedKeys.remember(record.keyId, record.publicKey, supported.key);
    trace.pass(
      'android.register',
      `key registered for "${record.packageName}"${mode === 'test' ? ', for test API keys only' : ''}`,
    );
    return { record, policy };
  }

  async function verify(evidence: unknown, ctx: PlatformContext): Promise<PlatformDetails> {
    const { record, policy } = await verifyKey(evidence, ctx);
    ctx.trace.facts.devicePublicKey = encodeBase64(record.publicKey);
    // the policy step android.deviceVelocity, last: only verifies that passed every other check
    // (the key registered) count against --max-verifies-per-device
    const velocity = await checkDeviceVelocity({
      check: 'android.deviceVelocity',
      service: 'android-key',
      keyId: record.keyId,
      owner: record.packageName,
      limit: policy.maxVerifiesPerDevice,
      store: deps.velocity,
      mode,
      now: ctx.now,
      trace: ctx.trace,
    });
    if (!velocity.ok)
      ctx.trace.policyFailed('android.deviceVelocity', velocity.reason, velocity.detail);
    return details(record);
  }

  async function verifyKey(evidence: unknown, ctx: PlatformContext): Promise<Verified> {
    const { trace } = ctx;
    trace.current('android.shape');
    const parsed = readAndroidKeyEvidence(evidence);
    trace.facts.keyId = encodeBase64(parsed.keyId);
    trace.facts.packageName = parsed.packageName;
    // the mode's own registrations only: a test key never sees (or squats) a live registration
    const record = await keys.find(parsed.keyId, mode);
    if (record) {
      if (parsed.certificateChain)
        throw new Rejection(
          'android_key_registered',
          'a certificate chain for a key that is already registered',
        );
      return assertion(record, parsed, ctx);
    }
    if (!parsed.certificateChain)
      throw new Rejection('android_key_unknown', 'a signature for a key that is not registered');
    return registration(parsed, ctx);
  }

  return { service: 'android-key', verify };
}

function begin(ctx: PlatformContext, shape: AndroidKeyShape): void {
  ctx.trace.facts.shape = shape;
  ctx.trace.plan(ANDROID_KEY_CHECKS[shape]);
  ctx.trace.pass(
    'android.shape',
    shape === 'registration'
      ? 'registration: a certificate chain for a key not yet registered'
      : 'assertion: a signature for a registered key',
  );
}

function describe(ctx: PlatformContext, record: AndroidKeyRecord): void {
  const facts = ctx.trace.facts;
  facts.securityLevel = lowerLevel(record.attestationSecurityLevel, record.keyMintSecurityLevel);
  facts.verifiedBootState = record.verifiedBootState;
  facts.deviceLocked = record.deviceLocked;
  facts.osPatchLevel = record.osPatchLevel;
}
