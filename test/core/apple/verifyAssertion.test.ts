import { beforeAll, describe, expect, it, vi } from 'vitest';
import { type AssertionKey, verifyAssertion } from '../../../src/core/apple/verifyAssertion.js';
import { createMemoryAllowlist } from '../../../src/core/memoryStores.js';
import { TraceRecorder } from '../../../src/core/trace.js';
import type { AllowlistReader } from '../../../src/core/ports.js';
import {
  type AssertionOptions,
  createAssertion,
  createDeviceKey,
  type DeviceKey,
  encodeCbor,
  rawCborMap,
  sha256,
  TEST_APP_ID,
  TEST_NONCE,
} from '../../support/appleFactory.js';
import { reasonOf } from './helpers.js';

let device: DeviceKey;
let other: DeviceKey;
beforeAll(async () => {
  [device, other] = await Promise.all([createDeviceKey(), createDeviceKey()]);
});

const allowlist = createMemoryAllowlist({ apple: [{ appId: TEST_APP_ID, env: 'production' }] });

interface RunOptions {
  key?: Partial<AssertionKey>;
  clientDataHash?: Uint8Array;
  allowlist?: AllowlistReader;
  raiseCounter?: (n: number) => Promise<boolean>;
  trace?: TraceRecorder;
}

function run(assertion: Uint8Array, options: RunOptions = {}) {
  return verifyAssertion(
    {
      assertion,
      clientDataHash: options.clientDataHash ?? sha256(TEST_NONCE),
      key: {
        publicKey: device.publicKey,
        appId: TEST_APP_ID,
        environment: 'Production',
        counter: 0,
        ...options.key,
      },
    },
    {
      allowlist: options.allowlist ?? allowlist,
      ...(options.raiseCounter ? { raiseCounter: options.raiseCounter } : {}),
      ...(options.trace ? { trace: options.trace } : {}),
    },
  );
}

const reasonFor = (options: AssertionOptions, runOptions: RunOptions = {}) =>
  reasonOf(run(createAssertion(device, options).assertion, runOptions));

describe('verifyAssertion', () => {
  it('accepts a good assertion (flags 0x40, no credential data) and returns its counter', async () => {
    const trace = new TraceRecorder();
    const result = await run(createAssertion(device, { counter: 9, flags: 0x40 }).assertion, {
      key: { counter: 8 },
      trace,
    });
    expect(result.counter).toBe(9);
    expect(trace.finish().map((c) => [c.id, c.status])).toEqual([
      ['apple.assertion.format', 'pass'],
      ['apple.assertion.signature', 'pass'],
      ['apple.assertion.appId', 'pass'],
      ['apple.assertion.policy', 'pass'],
      ['apple.assertion.counter', 'pass'],
    ]);
  });

  describe('check 1, format (apple_assertion_malformed)', () => {
    it.each<[string, AssertionOptions]>([
      ['a decoy second authenticatorData (duplicate key)', { encoding: 'duplicateKey' }],
      ['an indefinite-length map', { encoding: 'indefinite' }],
      ['trailing bytes after the object', { encoding: 'trailingBytes' }],
      ['junk after the 37-byte header', { authDataTrailer: Buffer.from([0x00]) }],
      ['an empty signature', { signature: Buffer.alloc(0) }],
    ])('%s', async (_name, options) => {
      expect(await reasonFor(options)).toBe('apple_assertion_malformed');
    });

    it.each<[string, Buffer]>([
      ['not CBOR', Buffer.from([0xff])],
      ['a CBOR list', encodeCbor([1, 2])],
      ['no signature', rawCborMap([['authenticatorData', Buffer.alloc(37)]])],
      ['no authenticatorData', rawCborMap([['signature', Buffer.alloc(70)]])],
      [
        'a text signature',
        rawCborMap([
          ['signature', 'sig'],
          ['authenticatorData', Buffer.alloc(37)],
        ]),
      ],
      [
        'a short authenticatorData',
        rawCborMap([
          ['signature', Buffer.alloc(70)],
          ['authenticatorData', Buffer.alloc(36)],
        ]),
      ],
    ])('%s', async (_name, assertion) => {
      expect(await reasonOf(run(assertion))).toBe('apple_assertion_malformed');
    });
  });

  describe('check 2, signature (apple_signature_invalid)', () => {
    it('a signature over another nonce', async () => {
      expect(await reasonFor({ corruptSignature: true })).toBe('apple_signature_invalid');
    });

    it('a signature by another key', async () => {
      expect(await reasonFor({ signWith: other.privateKey })).toBe('apple_signature_invalid');
    });

    it('bytes that are not a DER signature', async () => {
      expect(await reasonFor({ signature: Buffer.alloc(64, 7) })).toBe('apple_signature_invalid');
    });

    it('an assertion made for another request (clientDataHash differs)', async () => {
      expect(await reasonFor({ nonce: Buffer.alloc(32, 2) })).toBe('apple_signature_invalid');
    });

    it('a device that passed the raw nonce instead of its hash', async () => {
      expect(await reasonFor({ clientDataHash: TEST_NONCE })).toBe('apple_signature_invalid');
    });
  });

  describe('check 3, app (apple_app_not_allowed)', () => {
    it("an rpIdHash that is not the key's App ID", async () => {
      expect(await reasonFor({ appId: 'ZZZZZ99999.com.example.other' })).toBe(
        'apple_app_not_allowed',
      );
    });

    it('an App ID removed from the allowlist', async () => {
      expect(await reasonFor({}, { allowlist: createMemoryAllowlist({}) })).toBe(
        'apple_app_not_allowed',
      );
    });

    it("an App ID whose allowlist entry no longer admits the key's environment", async () => {
      const developmentOnly = createMemoryAllowlist({
        apple: [{ appId: TEST_APP_ID, env: 'development' }],
      });
      expect(await reasonFor({}, { allowlist: developmentOnly })).toBe('apple_app_not_allowed');
      expect(
        await reasonFor({}, { allowlist: developmentOnly, key: { environment: 'Development' } }),
      ).toBe('accepted');
    });
  });

  describe('check 4, counter (apple_counter_replay)', () => {
    it('a counter equal to or below the stored one', async () => {
      expect(await reasonFor({ counter: 5 }, { key: { counter: 5 } })).toBe('apple_counter_replay');
      expect(await reasonFor({ counter: 4 }, { key: { counter: 5 } })).toBe('apple_counter_replay');
      expect(await reasonFor({ counter: 6 }, { key: { counter: 5 } })).toBe('accepted');
    });

    it('a first assertion with counter 0', async () => {
      expect(await reasonFor({ counter: 0 }, { key: { counter: 0 } })).toBe('apple_counter_replay');
    });

    it('a counter another request raised first (the store says no)', async () => {
      expect(await reasonFor({ counter: 6 }, { raiseCounter: async () => false })).toBe(
        'apple_counter_replay',
      );
    });

    it('raises the counter only after every other check passed', async () => {
      const raiseCounter = vi.fn(async () => true);
      expect(
        await reasonFor({ counter: 4_000_000_000, corruptSignature: true }, { raiseCounter }),
      ).toBe('apple_signature_invalid');
      expect(
        await reasonFor(
          { counter: 4_000_000_000, appId: 'ZZZZZ99999.com.example.other' },
          { raiseCounter },
        ),
      ).toBe('apple_app_not_allowed');
      expect(await reasonFor({ counter: 3 }, { raiseCounter, key: { counter: 3 } })).toBe(
        'apple_counter_replay',
      );
      expect(raiseCounter).not.toHaveBeenCalled();
      expect(await reasonFor({ counter: 7 }, { raiseCounter })).toBe('accepted');
      expect(raiseCounter).toHaveBeenCalledExactlyOnceWith(7);
    });
  });

  it('reports the signature before a replayed counter', async () => {
    expect(await reasonFor({ counter: 1, corruptSignature: true }, { key: { counter: 10 } })).toBe(
      'apple_signature_invalid',
    );
  });
});
