import { beforeAll, describe, expect, it } from 'vitest';
import { createCertificateChainVerifier } from '../../../src/core/apple/certificateChain.js';
import {
  appAttestNonce,
  nonceExtensionValue,
  readNonceExtensionValue,
} from '../../../src/core/apple/nonceExtension.js';
import { defaultAppleRoots } from '../../../src/core/apple/trustRoots.js';
import {
  parseAttestationObject,
  verifyAttestation,
} from '../../../src/core/apple/verifyAttestation.js';
import { createMemoryAllowlist } from '../../../src/core/memoryStores.js';
import { TraceRecorder } from '../../../src/core/trace.js';
import type { AllowlistReader, AppleEnvPolicy } from '../../../src/core/ports.js';
import {
  type AttestationOptions,
  type BuiltAttestation,
  createAttestation,
  createDeviceKey,
  createTestCa,
  type DeviceKey,
  encodeCbor,
  rawCborMap,
  sha256,
  TEST_APP_ID,
  TEST_NONCE,
  TEST_NOW,
  type TestCa,
} from '../../support/appleFactory.js';
import { b64, loadVectors, reasonOf } from './helpers.js';

let ca: TestCa;
let device: DeviceKey;
let other: DeviceKey;
beforeAll(async () => {
  [ca, device, other] = await Promise.all([createTestCa(), createDeviceKey(), createDeviceKey()]);
});

const allow = (env: AppleEnvPolicy = 'production', appId = TEST_APP_ID): AllowlistReader =>
  createMemoryAllowlist({
    apple: [
      { appId: 'ZZZZZ99999.com.example.other', env: 'any' },
      { appId, env },
    ],
  });

interface RunOptions {
  keyId?: Uint8Array;
  clientDataHash?: Uint8Array | null;
  allowlist?: AllowlistReader;
  trace?: TraceRecorder;
}

function run(built: BuiltAttestation, options: RunOptions = {}) {
  return verifyAttestation(
    {
      attestation: built.attestation,
      keyId: options.keyId ?? device.keyId,
      clientDataHash:
        options.clientDataHash === undefined ? built.clientDataHash : options.clientDataHash,
      now: TEST_NOW,
    },
    {
      chain: createCertificateChainVerifier(ca.roots),
      allowlist: options.allowlist ?? allow(),
      ...(options.trace ? { trace: options.trace } : {}),
    },
  );
}

async function reasonFor(options: AttestationOptions, runOptions: RunOptions = {}) {
  return reasonOf(run(await createAttestation(ca, device, options), runOptions));
}

describe('verifyAttestation', () => {
  it('accepts a good attestation and returns what it establishes', async () => {
    const trace = new TraceRecorder();
    const result = await run(await createAttestation(ca, device), { trace });
    expect(Buffer.from(result.keyId).equals(device.keyId)).toBe(true);
    expect(Buffer.from(result.publicKey).equals(device.spki)).toBe(true);
    expect(result.appId).toBe(TEST_APP_ID);
    expect(result.environment).toBe('Production');
    expect(result.authData.counter).toBe(0);
    expect(trace.finish().map((c) => [c.id, c.status])).toEqual([
      ['apple.attestation.format', 'pass'],
      ['apple.attestation.chain', 'pass'],
      ['apple.attestation.nonce', 'pass'],
      ['apple.attestation.keyId', 'pass'],
      ['apple.attestation.appId', 'pass'],
      ['apple.attestation.counter', 'pass'],
      ['apple.attestation.platform', 'pass'],
      ['apple.attestation.environment', 'pass'],
      ['apple.attestation.distribution', 'pass'],
      ['apple.attestation.receipt', 'skip'],
    ]);
    expect(trace.facts).toMatchObject({ appId: TEST_APP_ID, environment: 'Production' });
  });

  it('accepts a development key for an app allowing development or any', async () => {
    const built = await createAttestation(ca, device, { environment: 'Development' });
    expect((await run(built, { allowlist: allow('development') })).environment).toBe('Development');
    expect((await run(built, { allowlist: allow('any') })).environment).toBe('Development');
  });

  it('accepts iOS 27 authData extensions with the ED flag clear', async () => {
    const built = await createAttestation(ca, device, {
      extensions: new Map([['apple_bundle_version_01', '1']]),
      flags: 0x40,
    });
    expect((await run(built)).authData.extensions?.get('apple_bundle_version_01')).toBe('1');
  });

  it('accepts a clientDataHash of any length (other integrations pass the raw challenge)', async () => {
    const raw = Buffer.from('test_server_challenge');
    expect((await run(await createAttestation(ca, device, { clientDataHash: raw }))).appId).toBe(
      TEST_APP_ID,
    );
  });

  describe('check 1, format (apple_attestation_malformed)', () => {
    it.each<[string, AttestationOptions]>([
      ['another fmt', { fmt: 'packed' }],
      ['fmt that is not text', { fmt: 1 }],
      ['no x5c', { omitX5c: true }],
      ['x5c that is not a list', { x5c: (p) => p.leaf }],
      ['an empty x5c', { x5c: () => [] }],
      ['x5c with a non-bytes entry', { x5c: (p) => [p.leaf, 'intermediate'] }],
      ['a decoy second authData (duplicate key)', { encoding: 'duplicateKey' }],
      ['an indefinite-length map', { encoding: 'indefinite' }],
      ['trailing bytes after the object', { encoding: 'trailingBytes' }],
      ['junk after the COSE key', { authDataTrailer: Buffer.from([0x01, 0x02]) }],
      ['a COSE key that is not a map', { coseKeyBytes: encodeCbor('key') }],
    ])('%s', async (_name, options) => {
      expect(await reasonFor(options)).toBe('apple_attestation_malformed');
    });

    it.each<[string, Buffer]>([
      ['not CBOR at all', Buffer.from('hello')],
      ['a CBOR list', encodeCbor(['apple-appattest'])],
      [
        'no authData',
        rawCborMap([
          ['fmt', 'apple-appattest'],
          ['attStmt', new Map([['x5c', [Buffer.alloc(3)]]])],
        ]),
      ],
      [
        'authData as text',
        rawCborMap([
          ['fmt', 'apple-appattest'],
          ['attStmt', new Map([['x5c', [Buffer.alloc(3)]]])],
          ['authData', 'x'],
        ]),
      ],
      [
        'no attStmt',
        rawCborMap([
          ['fmt', 'apple-appattest'],
          ['authData', Buffer.alloc(200)],
        ]),
      ],
    ])('%s', async (_name, attestation) => {
      const built = { ...(await createAttestation(ca, device)), attestation };
      expect(await reasonOf(run(built))).toBe('apple_attestation_malformed');
    });
  });

  it('check 2, chain: a chain to an unconfigured root is apple_chain_invalid', async () => {
    const attacker = await createTestCa();
    expect(await reasonFor({ intermediate: attacker.intermediate })).toBe('apple_chain_invalid');
  });

  describe('check 3, nonce (apple_nonce_mismatch)', () => {
    it('a leaf nonce that is not SHA-256(authData || clientDataHash)', async () => {
      expect(await reasonFor({ wrongNonce: sha256(Buffer.from('another request')) })).toBe(
        'apple_nonce_mismatch',
      );
    });

    it('an attestation made for another nonce (replayed)', async () => {
      expect(
        await reasonFor({ nonce: Buffer.alloc(32, 1) }, { clientDataHash: sha256(TEST_NONCE) }),
      ).toBe('apple_nonce_mismatch');
    });

    it('a device that passed the raw nonce instead of its hash', async () => {
      expect(
        await reasonFor({ clientDataHash: TEST_NONCE }, { clientDataHash: sha256(TEST_NONCE) }),
      ).toBe('apple_nonce_mismatch');
    });

    it('a leaf without the nonce extension', async () => {
      expect(await reasonFor({ omitNonceExtension: true })).toBe('apple_nonce_mismatch');
    });

    it('is skipped, and recorded as skipped, when clientDataHash is null', async () => {
      const trace = new TraceRecorder();
      await run(await createAttestation(ca, device, { wrongNonce: Buffer.alloc(32) }), {
        clientDataHash: null,
        trace,
      });
      expect(trace.finish().find((c) => c.id === 'apple.attestation.nonce')?.status).toBe('skip');
    });
  });

  describe('check 4, key id (apple_key_id_mismatch)', () => {
    it("a token keyId that is not the leaf key's", async () => {
      expect(await reasonFor({}, { keyId: other.keyId })).toBe('apple_key_id_mismatch');
    });

    it('a leaf certifying another key', async () => {
      expect(await reasonFor({ leafKey: other, credentialId: device.keyId })).toBe(
        'apple_key_id_mismatch',
      );
    });

    it('a credentialId that is not the key id', async () => {
      expect(await reasonFor({ credentialId: other.keyId })).toBe('apple_key_id_mismatch');
      expect(await reasonFor({ credentialId: device.keyId.subarray(0, 31) })).toBe(
        'apple_key_id_mismatch',
      );
    });
  });

  describe('check 5, app (apple_app_not_allowed)', () => {
    it('an App ID that is not allowlisted', async () => {
      expect(await reasonFor({ appId: 'ABCDE12345.com.example.unlisted' })).toBe(
        'apple_app_not_allowed',
      );
    });

    it('the right bundle under another team ID', async () => {
      expect(await reasonFor({ appId: 'XYZXY98765.com.example.attest' })).toBe(
        'apple_app_not_allowed',
      );
    });

    it('an empty allowlist', async () => {
      expect(await reasonFor({}, { allowlist: createMemoryAllowlist({}) })).toBe(
        'apple_app_not_allowed',
      );
    });
  });

  it('check 6, counter: a non-zero signCount is apple_counter_invalid', async () => {
    expect(await reasonFor({ counter: 1 })).toBe('apple_counter_invalid');
  });

  describe('check 7, environment (apple_environment_not_allowed)', () => {
    it('an aaguid naming no environment', async () => {
      expect(await reasonFor({ aaguid: Buffer.alloc(16) }, { allowlist: allow('any') })).toBe(
        'apple_environment_not_allowed',
      );
      expect(
        await reasonFor(
          { aaguid: Buffer.from('appattest\0\0\0\0\0\0\x01') },
          { allowlist: allow('any') },
        ),
      ).toBe('apple_environment_not_allowed');
    });

    it('a development key for an app allowlisted for production only', async () => {
      expect(
        await reasonFor({ environment: 'Development' }, { allowlist: allow('production') }),
      ).toBe('apple_environment_not_allowed');
    });

    it('a production key for an app allowlisted for development only', async () => {
      expect(
        await reasonFor({ environment: 'Production' }, { allowlist: allow('development') }),
      ).toBe('apple_environment_not_allowed');
    });
  });

  it('reports the first failing check in Apple order', async () => {
    const built = await createAttestation(ca, device, {
      wrongNonce: Buffer.alloc(32),
      counter: 3,
      environment: 'Development',
    });
    expect(await reasonOf(run(built))).toBe('apple_nonce_mismatch');
    expect(await reasonFor({ counter: 3, environment: 'Development' })).toBe(
      'apple_counter_invalid',
    );
  });
});

describe('a real capture re-sent for another challenge (the chain and the nonce read the same bytes)', () => {
  it('is refused when x5c[0] is a forged nonce extension followed by the genuine leaf as PEM', async () => {
    const vector = loadVectors().find((v) => v.id === 'veehaitch-ios-14.4')!;
    const original = parseAttestationObject(b64(vector.attestation!));
    const now = new Date(vector.verifyAt!);
    const forgedHash = sha256(Buffer.from('a challenge the device never saw'));
    const value = nonceExtensionValue(appAttestNonce(original.authData.bytes, forgedHash));
    // SEQUENCE { SEQUENCE { [3] { SEQUENCE { SEQUENCE { OID, OCTET STRING value } } } } }
    const tlv = (tag: number, body: Buffer) =>
      Buffer.concat([Buffer.from([tag, body.length]), body]);
    const oid = Buffer.from('06092a864886f763640802', 'hex');
    const forged = tlv(
      0x30,
      tlv(0x30, tlv(0xa3, tlv(0x30, tlv(0x30, Buffer.concat([oid, tlv(0x04, value)]))))),
    );
    const leafPem = `\n-----BEGIN CERTIFICATE-----\n${Buffer.from(original.x5c[0]!).toString('base64')}\n-----END CERTIFICATE-----\n`;
    const attestation = encodeCbor(
      new Map<string, unknown>([
        ['fmt', 'apple-appattest'],
        [
          'attStmt',
          new Map<string, unknown>([
            ['x5c', [Buffer.concat([forged, Buffer.from(leafPem)]), Buffer.from(original.x5c[1]!)]],
            ['receipt', Buffer.from(original.receipt!)],
          ]),
        ],
        ['authData', Buffer.from(original.authData.bytes)],
      ]),
    );
    // the forged prefix does carry the nonce for the new challenge
    expect(readNonceExtensionValue(forged)?.equals(value)).toBe(true);
    const outcome = await reasonOf(
      verifyAttestation(
        { attestation, keyId: b64(vector.keyId), clientDataHash: forgedHash, now },
        {
          chain: createCertificateChainVerifier(defaultAppleRoots()),
          allowlist: createMemoryAllowlist({ apple: [{ appId: vector.appId, env: 'any' }] }),
        },
      ),
    );
    expect(outcome).toBe('apple_chain_invalid');
  });
});
