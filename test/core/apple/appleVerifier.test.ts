import { beforeAll, describe, expect, it, vi } from 'vitest';
import { createAppleVerifier } from '../../../src/core/apple/appleVerifier.js';
import { encodeBase64 } from '../../../src/core/base64.js';
import {
  createMemoryAllowlist,
  createMemoryAppleKeyStore,
} from '../../../src/core/memoryStores.js';
import type {
  AllowlistReader,
  AppleEnvPolicy,
  AppleKeyRecord,
  AppleKeyStore,
} from '../../../src/core/ports.js';
import type { VerifyOutcome } from '../../../src/core/outcome.js';
import { verifyToken } from '../../../src/core/verify.js';
import {
  createAssertion,
  createAttestation,
  createDeviceKey,
  createTestCa,
  type DeviceKey,
  encodeAppleToken,
  sha256,
  TEST_APP_ID,
  TEST_NONCE,
  TEST_NOW,
  type TestCa,
} from '../../support/appleFactory.js';
import { encodeEnvelope } from '../../../src/core/envelope.js';

let ca: TestCa;
beforeAll(async () => {
  ca = await createTestCa();
});

const allowlistFor = (env: AppleEnvPolicy = 'production'): AllowlistReader =>
  createMemoryAllowlist({ apple: [{ appId: TEST_APP_ID, env }] });

interface Setup {
  allowlist?: AllowlistReader;
  keys?: AppleKeyStore;
}

/** A verify function over one verifier, as the server wires it. */
function service(setup: Setup = {}) {
  const keys = setup.keys ?? createMemoryAppleKeyStore();
  const verifier = createAppleVerifier({
    roots: ca.roots,
    allowlist: setup.allowlist ?? allowlistFor(),
    keys,
  });
  const verify = (
    token: Uint8Array,
    options: { nonce?: Uint8Array; clientDataHash?: Uint8Array } = {},
  ): Promise<VerifyOutcome> =>
    verifyToken(
      {
        token,
        expectedNonce: options.nonce ?? TEST_NONCE,
        ...(options.clientDataHash ? { clientDataHash: options.clientDataHash } : {}),
      },
      { now: () => TEST_NOW, verifiers: { apple: verifier } },
    );
  return { verify, keys };
}

const reason = (outcome: VerifyOutcome) => (outcome.ok ? 'accepted' : outcome.reason);
const counterOf = (outcome: VerifyOutcome) =>
  outcome.ok && outcome.details.service === 'apple'
    ? outcome.details.appleTokenDetails.assertionCounter
    : undefined;

async function registered(device: DeviceKey, setup: Setup = {}) {
  const s = service(setup);
  const { attestation } = await createAttestation(ca, device);
  const outcome = await s.verify(encodeAppleToken({ keyId: device.keyId, attestation }));
  expect(reason(outcome)).toBe('accepted');
  return s;
}

describe('Apple verifier through verifyToken', () => {
  describe('registration', () => {
    it('accepts, stores the key with counter 0 and reports the details', async () => {
      const device = await createDeviceKey();
      const s = service();
      const { attestation } = await createAttestation(ca, device);
      const outcome = await s.verify(encodeAppleToken({ keyId: device.keyId, attestation }));
      expect(outcome).toMatchObject({
        ok: true,
        details: {
          service: 'apple',
          appleTokenDetails: {
            keyIdentifier: encodeBase64(device.keyId),
            appId: TEST_APP_ID,
            environment: 'Production',
            assertionCounter: 0,
          },
        },
        facts: {
          service: 'apple',
          keyId: encodeBase64(device.keyId),
          appId: TEST_APP_ID,
          environment: 'Production',
          shape: 'registration',
        },
      });
      expect(
        outcome.checks.filter((c) => c.id.startsWith('apple.')).map((c) => [c.id, c.status]),
      ).toEqual([
        ['apple.shape', 'pass'],
        ['apple.attestation.format', 'pass'],
        ['apple.attestation.chain', 'pass'],
        ['apple.attestation.nonce', 'pass'],
        ['apple.attestation.keyId', 'pass'],
        ['apple.attestation.appId', 'pass'],
        ['apple.attestation.counter', 'pass'],
        ['apple.attestation.platform', 'pass'],
        ['apple.attestation.environment', 'pass'],
        ['apple.attestation.distribution', 'pass'],
        // the factory's receipt is not Apple's: reported, not required
        ['apple.attestation.receipt', 'skip'],
        ['apple.register', 'pass'],
        ['apple.deviceVelocity', 'skip'],
      ]);
      const stored = await s.keys.find(device.keyId);
      expect(stored).toMatchObject({ appId: TEST_APP_ID, environment: 'Production', counter: 0 });
      expect(Buffer.from(stored!.publicKey).equals(device.spki)).toBe(true);
    });

    it('binds the token nonce: an attestation made for another nonce is apple_nonce_mismatch', async () => {
      const device = await createDeviceKey();
      const { attestation } = await createAttestation(ca, device, {
        nonce: Buffer.alloc(32, 0x01),
      });
      const outcome = await service().verify(
        encodeAppleToken({ keyId: device.keyId, attestation }),
      );
      expect(reason(outcome)).toBe('apple_nonce_mismatch');
      expect(outcome.checks.find((c) => c.status === 'fail')).toMatchObject({
        id: 'apple.attestation.nonce',
        reason: 'apple_nonce_mismatch',
      });
      expect(outcome.checks.find((c) => c.id === 'apple.register')?.status).toBe('skip');
    });

    it('uses the clientDataHash verify-file gives instead of SHA-256(nonce)', async () => {
      const device = await createDeviceKey();
      const raw = Buffer.from('example_server_challenge');
      const { attestation } = await createAttestation(ca, device, { clientDataHash: raw });
      const token = encodeAppleToken({ keyId: device.keyId, attestation });
      expect(reason(await service().verify(token))).toBe('apple_nonce_mismatch');
      expect(reason(await service().verify(token, { clientDataHash: raw }))).toBe('accepted');
    });

    it('rejects a second registration of the same key (apple_key_registered)', async () => {
      const device = await createDeviceKey();
      const s = await registered(device);
      const { attestation } = await createAttestation(ca, device);
      expect(reason(await s.verify(encodeAppleToken({ keyId: device.keyId, attestation })))).toBe(
        'apple_key_registered',
      );
    });

    it('rejects the loser of a registration race (store insert says conflict)', async () => {
      const device = await createDeviceKey();
      const store = createMemoryAppleKeyStore();
      const racing: AppleKeyStore = { ...store, register: async () => false };
      const { attestation } = await createAttestation(ca, device);
      const outcome = await service({ keys: racing }).verify(
        encodeAppleToken({ keyId: device.keyId, attestation }),
      );
      expect(reason(outcome)).toBe('apple_key_registered');
      expect(outcome.checks.find((c) => c.status === 'fail')?.id).toBe('apple.register');
    });
  });

  describe('assertion', () => {
    it('accepts a registered key, raises the stored counter, and refuses a replay', async () => {
      const device = await createDeviceKey();
      const s = await registered(device);
      const token = encodeAppleToken({
        keyId: device.keyId,
        assertion: createAssertion(device, { counter: 1 }).assertion,
      });
      const outcome = await s.verify(token);
      expect(counterOf(outcome)).toBe(1);
      expect(outcome.facts).toMatchObject({
        shape: 'assertion',
        appId: TEST_APP_ID,
        environment: 'Production',
      });
      expect((await s.keys.find(device.keyId))?.counter).toBe(1);
      expect(reason(await s.verify(token))).toBe('apple_counter_replay');
      const next = encodeAppleToken({
        keyId: device.keyId,
        assertion: createAssertion(device, { counter: 5 }).assertion,
      });
      expect(counterOf(await s.verify(next))).toBe(5);
      const older = encodeAppleToken({
        keyId: device.keyId,
        assertion: createAssertion(device, { counter: 4 }).assertion,
      });
      expect(reason(await s.verify(older))).toBe('apple_counter_replay');
    });

    it('ignores an attestation sent along with the assertion of a registered key', async () => {
      const device = await createDeviceKey();
      const s = await registered(device);
      const { assertion } = createAssertion(device, { counter: 1 });
      const outcome = await s.verify(
        encodeAppleToken({
          keyId: device.keyId,
          attestation: Buffer.from('stale or junk'),
          assertion,
        }),
      );
      expect(counterOf(outcome)).toBe(1);
      expect(outcome.facts.shape).toBe('assertion');
    });

    it('rejects an assertion for an unknown key (apple_key_unknown)', async () => {
      const device = await createDeviceKey();
      const { assertion } = createAssertion(device);
      expect(
        reason(await service().verify(encodeAppleToken({ keyId: device.keyId, assertion }))),
      ).toBe('apple_key_unknown');
    });

    it('binds the token nonce: an assertion signed for another nonce is apple_signature_invalid', async () => {
      const device = await createDeviceKey();
      const s = await registered(device);
      const { assertion } = createAssertion(device, { nonce: Buffer.alloc(32, 0x02) });
      expect(reason(await s.verify(encodeAppleToken({ keyId: device.keyId, assertion })))).toBe(
        'apple_signature_invalid',
      );
    });

    it('leaves the stored counter alone when a forged assertion carries a huge counter', async () => {
      const device = await createDeviceKey();
      const s = await registered(device);
      const raise = vi.spyOn(s.keys, 'raiseCounter');
      const forged = createAssertion(device, {
        counter: 0xffffffff,
        corruptSignature: true,
      }).assertion;
      expect(
        reason(await s.verify(encodeAppleToken({ keyId: device.keyId, assertion: forged }))),
      ).toBe('apple_signature_invalid');
      expect(raise).not.toHaveBeenCalled();
      expect((await s.keys.find(device.keyId))?.counter).toBe(0);
      const genuine = createAssertion(device, { counter: 2 }).assertion;
      expect(
        counterOf(await s.verify(encodeAppleToken({ keyId: device.keyId, assertion: genuine }))),
      ).toBe(2);
    });

    it('rejects the loser of a counter race (store compare-and-set says no)', async () => {
      const device = await createDeviceKey();
      const store = createMemoryAppleKeyStore();
      await registered(device, { keys: store });
      const racing: AppleKeyStore = { ...store, raiseCounter: async () => false };
      const { assertion } = createAssertion(device, { counter: 3 });
      expect(
        reason(
          await service({ keys: racing }).verify(
            encodeAppleToken({ keyId: device.keyId, assertion }),
          ),
        ),
      ).toBe('apple_counter_replay');
    });

    it('stops a registered key once its app leaves the allowlist', async () => {
      const device = await createDeviceKey();
      const keys = createMemoryAppleKeyStore();
      await registered(device, { keys });
      const { assertion } = createAssertion(device, { counter: 1 });
      const token = encodeAppleToken({ keyId: device.keyId, assertion });
      expect(
        reason(await service({ keys, allowlist: createMemoryAllowlist({}) }).verify(token)),
      ).toBe('apple_app_not_allowed');
      expect((await keys.find(device.keyId))?.counter).toBe(0);
    });

    it("stops a registered key once its environment leaves the app's policy", async () => {
      const device = await createDeviceKey();
      const keys = createMemoryAppleKeyStore();
      await registered(device, { keys, allowlist: allowlistFor('any') });
      const { assertion } = createAssertion(device, { counter: 1 });
      const token = encodeAppleToken({ keyId: device.keyId, assertion });
      expect(
        reason(await service({ keys, allowlist: allowlistFor('development') }).verify(token)),
      ).toBe('apple_app_not_allowed');
      expect(
        reason(await service({ keys, allowlist: allowlistFor('production') }).verify(token)),
      ).toBe('accepted');
    });

    it('uses the key the store holds now, not a cached one, when the stored key changed', async () => {
      const [device, replacement] = [await createDeviceKey(), await createDeviceKey()];
      // a store whose records the test can edit in place, as an operator could edit the table
      const records = new Map<string, AppleKeyRecord>();
      const hex = (id: Uint8Array) => Buffer.from(id).toString('hex');
      const keys: AppleKeyStore = {
        find: async (id) => records.get(hex(id)) ?? null,
        register: async (record) => {
          records.set(hex(record.keyId), { ...record });
          return true;
        },
        raiseCounter: async (id, counter) => {
          const record = records.get(hex(id));
          if (!record || record.counter >= counter) return false;
          record.counter = counter;
          return true;
        },
      };
      const s = service({ keys });
      const { attestation } = await createAttestation(ca, device);
      expect(reason(await s.verify(encodeAppleToken({ keyId: device.keyId, attestation })))).toBe(
        'accepted',
      );
      expect(
        counterOf(
          await s.verify(
            encodeAppleToken({
              keyId: device.keyId,
              assertion: createAssertion(device, { counter: 1 }).assertion,
            }),
          ),
        ),
      ).toBe(1);
      records.get(hex(device.keyId))!.publicKey = replacement.spki;
      expect(
        reason(
          await s.verify(
            encodeAppleToken({
              keyId: device.keyId,
              assertion: createAssertion(device, { counter: 2 }).assertion,
            }),
          ),
        ),
      ).toBe('apple_signature_invalid');
      expect(
        counterOf(
          await s.verify(
            encodeAppleToken({
              keyId: device.keyId,
              assertion: createAssertion(replacement, { counter: 3 }).assertion,
            }),
          ),
        ),
      ).toBe(3);
    });
  });

  describe('keys it has seen (stores with raiseCounterIfUnchanged)', () => {
    /** the memory store, counting reads */
    function countingStore() {
      const store = createMemoryAppleKeyStore();
      const finds = { count: 0 };
      const find = store.find;
      store.find = (id) => (finds.count++, find(id));
      return { store, finds };
    }
    const assertionToken = (device: DeviceKey, counter: number) =>
      encodeAppleToken({
        keyId: device.keyId,
        assertion: createAssertion(device, { counter }).assertion,
      });

    it('verifies an assertion for a seen key with the counter update alone, and still refuses replays', async () => {
      const device = await createDeviceKey();
      const { store, finds } = countingStore();
      const s = await registered(device, { keys: store });
      const readsAfterRegistration = finds.count;
      expect(counterOf(await s.verify(assertionToken(device, 1)))).toBe(1);
      expect(counterOf(await s.verify(assertionToken(device, 2)))).toBe(2);
      expect(finds.count).toBe(readsAfterRegistration);
      const replay = await s.verify(assertionToken(device, 2));
      expect(reason(replay)).toBe('apple_counter_replay');
      expect(replay.checks.filter((c) => c.id === 'apple.shape')).toHaveLength(1);
      expect(store.records.get(Buffer.from(device.keyId).toString('hex'))?.counter).toBe(2);
      // a counter raised elsewhere (another instance) is refused here too, though the seen row says 2
      store.records.get(Buffer.from(device.keyId).toString('hex'))!.counter = 5;
      expect(reason(await s.verify(assertionToken(device, 4)))).toBe('apple_counter_replay');
      expect(counterOf(await s.verify(assertionToken(device, 6)))).toBe(6);
    });

    it('uses the row the store holds now when it was changed or removed underneath', async () => {
      const [device, replacement] = [await createDeviceKey(), await createDeviceKey()];
      const { store } = countingStore();
      const s = await registered(device, { keys: store });
      expect(counterOf(await s.verify(assertionToken(device, 1)))).toBe(1);
      const row = store.records.get(Buffer.from(device.keyId).toString('hex'))!;
      row.publicKey = replacement.spki;
      expect(reason(await s.verify(assertionToken(device, 2)))).toBe('apple_signature_invalid');
      // the row's key id stays the device's; its key is now the replacement's
      const signedByReplacement = (counter: number) =>
        encodeAppleToken({
          keyId: device.keyId,
          assertion: createAssertion(replacement, { counter }).assertion,
        });
      expect(counterOf(await s.verify(signedByReplacement(3)))).toBe(3);
      store.records.clear();
      expect(reason(await s.verify(signedByReplacement(4)))).toBe('apple_key_unknown');
    });
  });

  describe('attestation plus assertion', () => {
    it("registers the key with the assertion's counter, without checking the attestation nonce", async () => {
      const device = await createDeviceKey();
      const s = service();
      // the attestation was made at key creation, for some other request
      const { attestation } = await createAttestation(ca, device, {
        nonce: Buffer.alloc(32, 0x03),
      });
      const { assertion } = createAssertion(device, { counter: 4 });
      const outcome = await s.verify(
        encodeAppleToken({ keyId: device.keyId, attestation, assertion }),
      );
      expect(counterOf(outcome)).toBe(4);
      expect(outcome.facts.shape).toBe('attestation+assertion');
      expect(outcome.checks.find((c) => c.id === 'apple.attestation.nonce')?.status).toBe('skip');
      expect(outcome.checks.filter((c) => c.status === 'pass').map((c) => c.id)).toContain(
        'apple.assertion.signature',
      );
      expect((await s.keys.find(device.keyId))?.counter).toBe(4);
      // the next assertion must go above the stored counter
      const replay = encodeAppleToken({
        keyId: device.keyId,
        assertion: createAssertion(device, { counter: 4 }).assertion,
      });
      expect(reason(await s.verify(replay))).toBe('apple_counter_replay');
    });

    it('requires a first assertion counter of at least 1', async () => {
      const device = await createDeviceKey();
      const s = service();
      const { attestation } = await createAttestation(ca, device);
      const { assertion } = createAssertion(device, { counter: 0 });
      expect(
        reason(await s.verify(encodeAppleToken({ keyId: device.keyId, attestation, assertion }))),
      ).toBe('apple_counter_replay');
      expect(await s.keys.find(device.keyId)).toBeNull();
    });

    it('stores nothing when the assertion does not verify', async () => {
      const device = await createDeviceKey();
      const s = service();
      const { attestation } = await createAttestation(ca, device);
      const { assertion } = createAssertion(device, { counter: 1, nonce: Buffer.alloc(32, 0x09) });
      expect(
        reason(await s.verify(encodeAppleToken({ keyId: device.keyId, attestation, assertion }))),
      ).toBe('apple_signature_invalid');
      expect(await s.keys.find(device.keyId)).toBeNull();
    });

    it('rejects an assertion signed by a key other than the attested one', async () => {
      const [device, other] = [await createDeviceKey(), await createDeviceKey()];
      const { attestation } = await createAttestation(ca, device);
      const { assertion } = createAssertion(other, { counter: 1 });
      expect(
        reason(
          await service().verify(encodeAppleToken({ keyId: device.keyId, attestation, assertion })),
        ),
      ).toBe('apple_signature_invalid');
    });

    it('still runs every other attestation check', async () => {
      const device = await createDeviceKey();
      const attacker = await createTestCa();
      const { attestation } = await createAttestation(attacker, device);
      const { assertion } = createAssertion(device, { counter: 1 });
      expect(
        reason(
          await service().verify(encodeAppleToken({ keyId: device.keyId, attestation, assertion })),
        ),
      ).toBe('apple_chain_invalid');
    });

    it('rejects the loser of a registration race', async () => {
      const device = await createDeviceKey();
      const racing: AppleKeyStore = { ...createMemoryAppleKeyStore(), register: async () => false };
      const { attestation } = await createAttestation(ca, device);
      const { assertion } = createAssertion(device, { counter: 1 });
      expect(
        reason(
          await service({ keys: racing }).verify(
            encodeAppleToken({ keyId: device.keyId, attestation, assertion }),
          ),
        ),
      ).toBe('apple_key_registered');
    });
  });

  describe('malformed evidence (token_malformed)', () => {
    const apple = (entries: [string, unknown][]) =>
      encodeEnvelope({ nonce: TEST_NONCE, service: 'apple', evidence: new Map(entries) });
    it.each<[string, [string, unknown][]]>([
      ['no keyId', [['assertion', Buffer.alloc(10)]]],
      [
        'a 31-byte keyId',
        [
          ['keyId', Buffer.alloc(31)],
          ['assertion', Buffer.alloc(10)],
        ],
      ],
      [
        'a 33-byte keyId',
        [
          ['keyId', Buffer.alloc(33)],
          ['assertion', Buffer.alloc(10)],
        ],
      ],
      [
        'a base64 text keyId',
        [
          ['keyId', encodeBase64(Buffer.alloc(32))],
          ['assertion', Buffer.alloc(10)],
        ],
      ],
      ['neither attestation nor assertion', [['keyId', Buffer.alloc(32)]]],
      [
        'an attestation that is not bytes',
        [
          ['keyId', Buffer.alloc(32)],
          ['attestation', 'base64...'],
        ],
      ],
      [
        'an assertion that is not bytes',
        [
          ['keyId', Buffer.alloc(32)],
          ['assertion', 7],
        ],
      ],
    ])('%s', async (_name, entries) => {
      const outcome = await service().verify(apple(entries));
      expect(reason(outcome)).toBe('token_malformed');
      expect(outcome.checks.find((c) => c.status === 'fail')?.id).toBe('apple.shape');
    });
  });

  it('refuses to be built without trust roots', () => {
    expect(() =>
      createAppleVerifier({
        roots: [],
        allowlist: allowlistFor(),
        keys: createMemoryAppleKeyStore(),
      }),
    ).toThrow();
  });

  it('hashes the final nonce for clientDataHash (SHA-256)', async () => {
    const device = await createDeviceKey();
    const nonce = Buffer.alloc(48, 0x42);
    const { attestation } = await createAttestation(ca, device, { clientDataHash: sha256(nonce) });
    const outcome = await service().verify(
      encodeAppleToken({ nonce, keyId: device.keyId, attestation }),
      { nonce },
    );
    expect(reason(outcome)).toBe('accepted');
  });
});
