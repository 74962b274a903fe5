import { X509Certificate } from 'node:crypto';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createCertificateChainVerifier } from '../../../src/core/apple/certificateChain.js';
import { decodeStrictCbor } from '../../../src/core/cbor.js';
import {
  type AttestationOptions,
  createAttestation,
  createDeviceKey,
  createTestCa,
  createTestIntermediate,
  createTestRoot,
  days,
  type DeviceKey,
  TEST_NOW,
  type TestCa,
  type TestCertificate,
} from '../../support/appleFactory.js';
import { reasonOf } from './helpers.js';

let ca: TestCa;
let attacker: TestCa;
let device: DeviceKey;

beforeAll(async () => {
  [ca, attacker, device] = await Promise.all([createTestCa(), createTestCa(), createDeviceKey()]);
});

afterEach(() => {
  vi.restoreAllMocks();
});

/** The x5c list of an attestation built with `options`. */
async function x5cOf(options: AttestationOptions = {}): Promise<Uint8Array[]> {
  const { attestation } = await createAttestation(ca, device, options);
  const root = decodeStrictCbor(attestation, { maxDepth: 8, maxBytes: 65536 }) as Map<
    string,
    Map<string, Uint8Array[]>
  >;
  return root.get('attStmt')!.get('x5c')!;
}

const pem = (der: Uint8Array) =>
  Buffer.from(
    `-----BEGIN CERTIFICATE-----\n${Buffer.from(der).toString('base64')}\n-----END CERTIFICATE-----\n`,
  );

const at = (offsetMs: number) => new Date(TEST_NOW.getTime() + offsetMs);

describe('certificate chain', () => {
  it('accepts leaf <- intermediate <- configured root and returns the leaf', async () => {
    const x5c = await x5cOf();
    const leaf = createCertificateChainVerifier(ca.roots).verify(x5c, TEST_NOW);
    expect(leaf.raw.equals(Buffer.from(x5c[0]!))).toBe(true);
  });

  it('accepts a chain to any of several configured roots', async () => {
    const x5c = await x5cOf();
    expect(
      createCertificateChainVerifier([...attacker.roots, ...ca.roots]).verify(x5c, TEST_NOW),
    ).toBeInstanceOf(X509Certificate);
  });

  describe('rejects (apple_chain_invalid)', () => {
    const cases: [string, () => Promise<Uint8Array[]>, Date?][] = [
      [
        'a chain to a root that is not configured',
        () => x5cOf({ intermediate: attacker.intermediate }),
      ],
      [
        'an attacker root sent inside x5c',
        () =>
          x5cOf({
            intermediate: attacker.intermediate,
            root: attacker.root,
            x5c: (p) => [p.leaf, p.intermediate, p.root],
          }),
      ],
      [
        'the genuine root sent as a third certificate',
        () => x5cOf({ x5c: (p) => [p.leaf, p.intermediate, p.root] }),
      ],
      [
        'an attacker root in place of the intermediate',
        () => x5cOf({ intermediate: attacker.root, x5c: (p) => [p.leaf, p.intermediate] }),
      ],
      [
        'a leaf signed directly by the configured root',
        () => x5cOf({ intermediate: ca.root, x5c: (p) => [p.leaf, p.intermediate] }),
      ],
      ['a missing intermediate', () => x5cOf({ x5c: (p) => [p.leaf] })],
      ['leaf and intermediate swapped', () => x5cOf({ x5c: (p) => [p.intermediate, p.leaf] })],
      [
        'an unreadable leaf',
        () => x5cOf({ x5c: (p) => [Buffer.from('not a certificate'), p.intermediate] }),
      ],
      [
        'an unreadable intermediate',
        () => x5cOf({ x5c: (p) => [p.leaf, p.intermediate.subarray(0, 100)] }),
      ],
      [
        'an expired leaf',
        () => x5cOf({ leafValidity: { notBefore: at(-days(10)), notAfter: at(-days(1)) } }),
      ],
      [
        'a leaf not yet valid',
        () => x5cOf({ leafValidity: { notBefore: at(days(1)), notAfter: at(days(10)) } }),
      ],
      ['an empty list', async () => []],
      // OpenSSL would verify the certificate inside while other checks read the bytes as sent
      ['a leaf sent as PEM text', () => x5cOf({ x5c: (p) => [pem(p.leaf), p.intermediate] })],
      [
        'a leaf after other bytes and a BEGIN line',
        () =>
          x5cOf({
            x5c: (p) => [
              Buffer.concat([Buffer.from([0x30, 0x00, 0x0a]), pem(p.leaf)]),
              p.intermediate,
            ],
          }),
      ],
      [
        'a leaf followed by other bytes',
        () =>
          x5cOf({
            x5c: (p) => [Buffer.concat([p.leaf, Buffer.from([0x30, 0x00])]), p.intermediate],
          }),
      ],
      [
        'an intermediate sent as PEM text',
        () => x5cOf({ x5c: (p) => [p.leaf, pem(p.intermediate)] }),
      ],
    ];
    it.each(cases)('%s', async (_name, build, now = TEST_NOW) => {
      const x5c = await build();
      expect(await reasonOf(() => createCertificateChainVerifier(ca.roots).verify(x5c, now))).toBe(
        'apple_chain_invalid',
      );
    });

    it('an expired or not-yet-valid intermediate', async () => {
      const expired = await createTestIntermediate(ca.root, {
        notBefore: at(-days(400)),
        notAfter: at(-days(1)),
      });
      const future = await createTestIntermediate(ca.root, {
        notBefore: at(days(1)),
        notAfter: at(days(400)),
      });
      for (const intermediate of [expired, future]) {
        const x5c = await x5cOf({ intermediate });
        expect(
          await reasonOf(() => createCertificateChainVerifier(ca.roots).verify(x5c, TEST_NOW)),
        ).toBe('apple_chain_invalid');
      }
    });

    it('an intermediate that is not a CA', async () => {
      const notCa = await createTestIntermediate(ca.root, { ca: false });
      const x5c = await x5cOf({ intermediate: notCa });
      expect(
        await reasonOf(() => createCertificateChainVerifier(ca.roots).verify(x5c, TEST_NOW)),
      ).toBe('apple_chain_invalid');
    });

    it('an intermediate from a look-alike root (same name, other key)', async () => {
      const lookAlike = await createTestRoot({ name: ca.root.cert.subject });
      const intermediate = await createTestIntermediate(lookAlike);
      const x5c = await x5cOf({ intermediate });
      expect(
        await reasonOf(() => createCertificateChainVerifier(ca.roots).verify(x5c, TEST_NOW)),
      ).toBe('apple_chain_invalid');
    });

    it('a leaf signed by another intermediate of the same name', async () => {
      const twin = await createTestIntermediate(ca.root);
      const x5c = await x5cOf({ intermediate: twin, x5c: (p) => [p.leaf, ca.intermediate.der] });
      expect(
        await reasonOf(() => createCertificateChainVerifier(ca.roots).verify(x5c, TEST_NOW)),
      ).toBe('apple_chain_invalid');
    });

    it('an expired or not-yet-valid root', async () => {
      const expiring = await createTestRoot({ notBefore: at(-days(400)), notAfter: at(days(5)) });
      const intermediate = await createTestIntermediate(expiring);
      const x5c = await x5cOf({
        intermediate,
        leafValidity: { notBefore: at(-days(30)), notAfter: at(days(30)) },
      });
      const verifier = createCertificateChainVerifier([new X509Certificate(expiring.der)]);
      expect(verifier.verify(x5c, TEST_NOW)).toBeInstanceOf(X509Certificate);
      expect(await reasonOf(() => verifier.verify(x5c, at(days(6))))).toBe('apple_chain_invalid');
      expect(await reasonOf(() => verifier.verify(x5c, at(-days(401))))).toBe(
        'apple_chain_invalid',
      );
    });
  });

  describe('intermediate cache', () => {
    it('verifies the intermediate once, then only the leaf', async () => {
      const x5c = await x5cOf();
      const verify = vi.spyOn(X509Certificate.prototype, 'verify');
      const verifier = createCertificateChainVerifier(ca.roots);
      verifier.verify(x5c, TEST_NOW);
      expect(verify).toHaveBeenCalledTimes(2);
      verifier.verify(await x5cOf(), TEST_NOW); // a new leaf under the same intermediate
      expect(verify).toHaveBeenCalledTimes(3);
    });

    it('still checks validity periods at each instant for a cached intermediate', async () => {
      const shortLived = await createTestIntermediate(ca.root, {
        notBefore: at(-days(10)),
        notAfter: at(days(10)),
      });
      const x5c = await x5cOf({
        intermediate: shortLived,
        leafValidity: { notBefore: at(-days(30)), notAfter: at(days(30)) },
      });
      const verifier = createCertificateChainVerifier(ca.roots);
      expect(verifier.verify(x5c, TEST_NOW)).toBeInstanceOf(X509Certificate);
      expect(await reasonOf(() => verifier.verify(x5c, at(days(11))))).toBe('apple_chain_invalid');
      expect(await reasonOf(() => verifier.verify(x5c, at(-days(11))))).toBe('apple_chain_invalid');
      expect(verifier.verify(x5c, TEST_NOW)).toBeInstanceOf(X509Certificate);
    });

    it('does not cache an intermediate that failed, so it fails every time', async () => {
      const x5c = await x5cOf({ intermediate: attacker.intermediate });
      const verifier = createCertificateChainVerifier(ca.roots);
      expect(await reasonOf(() => verifier.verify(x5c, TEST_NOW))).toBe('apple_chain_invalid');
      expect(await reasonOf(() => verifier.verify(x5c, TEST_NOW))).toBe('apple_chain_invalid');
    });

    it('stays bounded: an evicted intermediate is verified again', async () => {
      const second: TestCertificate = await createTestIntermediate(ca.root, {
        name: 'CN=Test App Attestation CA 2',
      });
      const [a, b] = [await x5cOf(), await x5cOf({ intermediate: second })];
      const verifier = createCertificateChainVerifier(ca.roots, { intermediateCacheSize: 1 });
      const verify = vi.spyOn(X509Certificate.prototype, 'verify');
      verifier.verify(a, TEST_NOW);
      verifier.verify(b, TEST_NOW);
      verifier.verify(a, TEST_NOW);
      expect(verify).toHaveBeenCalledTimes(6);
    });
  });

  it('refuses to be built without a root, or with a root that is not a CA', async () => {
    expect(() => createCertificateChainVerifier([])).toThrow();
    const [leaf] = await x5cOf();
    expect(() => createCertificateChainVerifier([new X509Certificate(leaf!)])).toThrow();
  });
});
