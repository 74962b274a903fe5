/**
 * App Attest receipts against the real ones: each gets the verdict and facts of the independent
 * check (test/fixtures/apple-receipts), and every rule is shown to reject when it is broken.
 */
import { createHash, X509Certificate } from 'node:crypto';
import * as pkijs from 'pkijs';
import { describe, expect, it } from 'vitest';
import { defaultAppleRoots } from '../../../src/core/apple/trustRoots.js';
import {
  createReceiptVerifier,
  defaultReceiptRoots,
  type ReceiptExpectation,
} from '../../../src/core/apple/verifyReceipt.js';
import { after, loadReceiptVectors } from '../../support/receiptVectors.js';

const verifier = createReceiptVerifier();
const vectors = loadReceiptVectors();
const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const veehaitch = vectors.find((v) => v.name === 'veehaitch-ios-14.2')!;
const attest = (v = veehaitch): ReceiptExpectation => ({
  type: 'ATTEST',
  appId: v.appId,
  attestedCertificate: v.leaf,
});
const fresh = (v = veehaitch) => after(v.check.fields.creationTime.parsed, 5);

describe('Apple Root CA - G3', () => {
  it('is built in with the fingerprint Apple publishes', () => {
    const [root] = defaultReceiptRoots();
    expect(root!.fingerprint256).toBe(
      '63:34:3A:BF:B8:9A:6A:03:EB:B5:7E:9B:3F:5F:A7:BE:7C:4F:5C:75:6F:30:17:B3:A8:C4:88:C3:65:3E:91:79',
    );
    expect(root!.subject).toContain('CN=Apple Root CA - G3');
  });
});

describe('every real attestation receipt', () => {
  it('covers all 18 captures', () => expect(vectors).toHaveLength(18));

  for (const v of vectors) {
    const { check } = v;
    it(`${v.name}: the independent check's facts, and its verdict a few seconds after creation`, async () => {
      expect(sha256(v.receipt)).toBe(check.receiptSha256);
      const verdict = await verifier.verify(v.receipt, attest(v), fresh(v));
      expect(verdict.facts).not.toBeNull();
      const facts = verdict.facts!;
      expect(facts.type).toBe(check.fields.receiptType);
      expect(facts.appId).toBe(check.fields.appId);
      expect(sha256(facts.attestedCertificate)).toBe(check.fields.attestedPublicKey.sha256);
      expect(facts.creationTime.toISOString()).toBe(
        new Date(check.fields.creationTime.parsed).toISOString(),
      );
      expect(facts.expirationTime?.toISOString()).toBe(
        new Date(check.fields.expirationTime!.parsed).toISOString(),
      );
      expect(facts.notBefore).toBeNull();
      expect(facts.riskMetric).toBe(check.fields.riskMetric?.value ?? null);
      expect(facts.environment).toBe(
        check.fields.unknownAttributes.find((a) => a.type === 7)?.utf8 ?? null,
      );
      if (check.verdict.authenticAtReceiptCreationTime === 'yes') {
        expect(verdict).toMatchObject({ valid: true });
      } else {
        // webauthn4j (2020): signed attributes whose signature does not cover DER(signedAttrs)
        expect(v.name).toBe('webauthn4j-appattest');
        expect(verdict).toMatchObject({
          valid: false,
          problem: expect.stringMatching(/CMS signature does not verify/),
        });
      }
    });

    it(`${v.name}: the independent check's verdict at verifyAt (${check.verdict.validAtVerifyAt})`, async () => {
      const verdict = await verifier.verify(v.receipt, attest(v), new Date(check.verifyAt));
      expect(verdict.valid).toBe(check.verdict.validAtVerifyAt === 'yes');
    });
  }
});

describe('every refreshed (RECEIPT) receipt of the veehaitch captures', () => {
  const refreshed = vectors.flatMap((v) => v.refreshed.map((r) => ({ v, r })));
  it('there are 13, with risk metrics 1 to 3', () => {
    expect(refreshed).toHaveLength(13);
    expect(new Set(refreshed.map(({ r }) => r.check.riskMetric?.value))).toEqual(
      new Set([1, 2, 3]),
    );
  });
  for (const { v, r } of refreshed) {
    it(`${v.name} ${r.id}: RECEIPT, risk metric ${r.check.riskMetric?.value}, valid after creation`, async () => {
      expect(sha256(r.bytes)).toBe(r.check.receiptSha256);
      const verdict = await verifier.verify(
        r.bytes,
        { type: 'RECEIPT', appId: v.appId, attestedCertificate: v.leaf },
        after(r.check.creationTime!.parsed, 5),
      );
      expect(verdict).toMatchObject({ valid: true });
      const facts = verdict.facts!;
      expect(facts.type).toBe('RECEIPT');
      expect(facts.riskMetric).toBe(r.check.riskMetric!.value);
      expect(facts.notBefore!.toISOString()).toBe(
        new Date(r.check.notBefore!.parsed).toISOString(),
      );
      expect(facts.expirationTime!.toISOString()).toBe(
        new Date(r.check.expirationTime!.parsed).toISOString(),
      );
      // refreshed receipts are not ATTEST: the type is checked
      expect(
        (await verifier.verify(r.bytes, attest(v), after(r.check.creationTime!.parsed, 5))).valid,
      ).toBe(false);
    });
  }
});

describe('each rule rejects when broken', () => {
  const problem = async (bytes: Uint8Array, expect_ = attest(), now = fresh()) => {
    const verdict = await verifier.verify(bytes, expect_, now);
    return verdict.valid ? 'valid' : verdict.problem;
  };

  it('the App Attest root is not the receipt root (chain)', async () => {
    const wrong = createReceiptVerifier(defaultAppleRoots());
    const verdict = await wrong.verify(veehaitch.receipt, attest(), fresh());
    expect(verdict).toMatchObject({ valid: false, problem: expect.stringMatching(/signer chain/) });
  });

  it('a signer certificate expired at the verification time', async () => {
    // the 2020 signer expired on 2021-06-18; the receipt itself (90 days) is checked later
    expect(await problem(veehaitch.receipt, attest(), new Date('2021-07-01T00:00:00Z'))).toMatch(
      /signer chain|expired/,
    );
  });

  it('a receipt created after the verification time', async () => {
    expect(
      await problem(
        veehaitch.receipt,
        attest(),
        after(veehaitch.check.fields.creationTime.parsed, -1),
      ),
    ).toMatch(/created at .* after the verification time/);
  });

  it('an expired receipt', async () => {
    expect(
      await problem(
        veehaitch.receipt,
        attest(),
        after(veehaitch.check.fields.expirationTime!.parsed, 1),
      ),
    ).toMatch(/expired/);
  });

  it('another App ID', async () => {
    expect(await problem(veehaitch.receipt, { ...attest(), appId: 'ABCDE12345.other' })).toMatch(
      /App ID/,
    );
  });

  it("another attestation's certificate", async () => {
    const other = vectors.find((v) => v.name === 'dreipol-pyattest')!;
    expect(
      await problem(veehaitch.receipt, { ...attest(), attestedCertificate: other.leaf }),
    ).toMatch(/attested certificate/);
  });

  it('the wrong type', async () => {
    expect(await problem(veehaitch.receipt, { ...attest(), type: 'RECEIPT' })).toMatch(/type/);
  });

  it('one content byte changed (the app ID): the CMS signature', async () => {
    const bytes = Buffer.from(veehaitch.receipt);
    const at = bytes.indexOf(Buffer.from('6MURL8TA57.de.vincent'));
    bytes[at + 11] = 'D'.charCodeAt(0);
    expect(await problem(bytes, { ...attest(), appId: undefined })).toMatch(
      /CMS signature does not verify/,
    );
  });

  it('one signature byte changed', async () => {
    const bytes = Buffer.from(veehaitch.receipt);
    // the signature is the last OCTET STRING before the closing end-of-contents octets
    const signer = new X509Certificate(veehaitch.leaf); // sanity: the leaf parses
    expect(signer.subject).toContain('AAA Certification');
    const at = bytes.lastIndexOf(Buffer.from([0x04, 0x47, 0x30, 0x45]));
    const at2 = at >= 0 ? at : bytes.lastIndexOf(Buffer.from([0x04, 0x46, 0x30, 0x44]));
    expect(at2).toBeGreaterThan(0);
    bytes[at2 + 10]! ^= 0x01;
    expect(await problem(bytes)).toMatch(/CMS signature does not verify|CMS/);
  });

  it('bytes that are not a CMS message, trailing bytes, too many bytes', async () => {
    expect(await problem(new Uint8Array(0))).toMatch(/empty/);
    expect(await problem(Buffer.from('not a receipt'))).toMatch(/not BER|ContentInfo|unreadable/);
    expect(await problem(Buffer.concat([veehaitch.receipt, Buffer.from([0])]))).toMatch(
      /bytes follow/,
    );
    expect(await problem(new Uint8Array(40_000))).toMatch(/more than/);
  });

  it('a verifier that verified a receipt rejects it when a certificate of its chain is changed, at an instant outside the chain, and with a changed signature', async () => {
    // one verifier throughout: what it remembers of the first check must not carry over
    const again = createReceiptVerifier();
    expect((await again.verify(veehaitch.receipt, attest(), fresh())).valid).toBe(true);
    const info = pkijs.ContentInfo.fromBER(new Uint8Array(veehaitch.receipt));
    const ders = new pkijs.SignedData({ schema: info.content })
      .certificates!.map((c) => Buffer.from(c.toSchema().toBER(false)))
      // the receipt carries a copy of Apple Root CA - G3 too, which the check never reads
      .filter((der) => !der.equals(defaultReceiptRoots()[0]!.raw));
    expect(ders).toHaveLength(2); // the signer and Apple Application Integration CA 5 - G1
    for (const der of ders) {
      const bytes = Buffer.from(veehaitch.receipt);
      bytes[bytes.indexOf(der) + der.length - 5]! ^= 0x01; // inside the certificate's signature
      expect(await again.verify(bytes, attest(), fresh())).toMatchObject({
        valid: false,
        problem: expect.stringMatching(/signer chain does not verify/),
      });
    }
    expect(
      await again.verify(veehaitch.receipt, attest(), new Date('2021-07-01T00:00:00Z')),
    ).toMatchObject({ valid: false, problem: expect.stringMatching(/signer chain|expired/) });
    const signature = Buffer.from(veehaitch.receipt);
    signature[signature.lastIndexOf(Buffer.from([0x04, 0x47, 0x30, 0x45])) + 10]! ^= 0x01;
    expect(await again.verify(signature, attest(), fresh())).toMatchObject({
      valid: false,
      problem: expect.stringMatching(/CMS signature does not verify/),
    });
    expect((await again.verify(veehaitch.receipt, attest(), fresh())).valid).toBe(true);
  });

  it('a SignedData without certificates, or without the intermediate, after the whole one verified', async () => {
    const again = createReceiptVerifier();
    expect((await again.verify(veehaitch.receipt, attest(), fresh())).valid).toBe(true);
    const reencoded = (edit: (certificates: pkijs.CertificateSet['certificates']) => unknown[]) => {
      const info = pkijs.ContentInfo.fromBER(new Uint8Array(veehaitch.receipt));
      const signed = new pkijs.SignedData({ schema: info.content });
      const kept = edit(signed.certificates!);
      signed.certificates = kept.length
        ? (kept as pkijs.CertificateSet['certificates'])
        : undefined;
      return new Uint8Array(
        new pkijs.ContentInfo({ contentType: info.contentType, content: signed.toSchema(true) })
          .toSchema()
          .toBER(false),
      );
    };
    expect(
      await again.verify(
        reencoded(() => []),
        attest(),
        fresh(),
      ),
    ).toMatchObject({
      valid: false,
      problem: 'the SignedData carries no certificates',
    });
    const withoutIntermediate = reencoded((certificates) =>
      certificates.filter(
        (c) =>
          !(c instanceof pkijs.Certificate) ||
          !c.subject.typesAndValues.some((t) =>
            String(t.value.valueBlock.value).includes('Integration CA 5'),
          ),
      ),
    );
    expect(await again.verify(withoutIntermediate, attest(), fresh())).toMatchObject({
      valid: false,
      problem: expect.stringMatching(/signer chain does not verify/),
    });
    expect((await again.verify(veehaitch.receipt, attest(), fresh())).valid).toBe(true);
  });

  it('truncations never throw', async () => {
    for (let n = 0; n < veehaitch.receipt.length; n += 97) {
      const verdict = await verifier.verify(veehaitch.receipt.subarray(0, n), attest(), fresh());
      expect(verdict.valid).toBe(false);
    }
  });
});
