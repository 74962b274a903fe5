/**
 * `attest verify-file` and App Attest receipts: the receipt of a token's attestation is shown
 * (text line, `--json` `receipt`), and `--receipt FILE` checks a receipt file alone; real
 * receipts, with the independent check's verdicts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { after, loadReceiptVectors } from '../support/receiptVectors.js';
import { scratch, verifyFile } from '../support/verifyFileTokens.js';
import { encodeEnvelope } from '../../src/core/envelope.js';

const vectors = loadReceiptVectors();
const v = vectors.find((x) => x.name === 'veehaitch-ios-14.2')!;
const created = v.check.fields.creationTime.parsed;
const refreshed = v.refreshed[0]!;

let files: ReturnType<typeof scratch>;
beforeAll(() => {
  files = scratch('attest-receipt-');
});
afterAll(() => files.remove());

const tokenOf = (attestation: Buffer) =>
  encodeEnvelope({
    nonce: Buffer.alloc(32, 0x5a),
    service: 'apple',
    evidence: new Map<string, unknown>([
      ['keyId', v.keyId],
      ['attestation', attestation],
    ]),
  });
const flags = ['--app-id', v.appId, '--client-data-hash', v.clientDataHash.toString('base64')];

describe('verify-file shows the receipt of a token', () => {
  it('valid a few seconds after its creation (--json receipt)', async () => {
    const run = await verifyFile([
      files.file(tokenOf(v.attestation)),
      ...flags,
      '--at',
      after(created, 5).toISOString(),
      '--json',
    ]);
    expect(run.code).toBe(0);
    expect((run.json as unknown as { receipt: unknown }).receipt).toEqual({
      valid: true,
      present: true,
      type: 'ATTEST',
      creationTime: new Date(created).toISOString(),
      expirationTime: new Date(v.check.fields.expirationTime!.parsed).toISOString(),
      riskMetric: null,
      problem: null,
    });
  });

  it('at the capture verifyAt: the token is valid, the receipt (created later) is not', async () => {
    const run = await verifyFile([
      files.file(tokenOf(v.attestation)),
      ...flags,
      '--at',
      v.check.verifyAt,
    ]);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(
      /receipt: INVALID \(ATTEST, app 6MURL8TA57\.de\.vincent-haupert\.apple-appattest-poc, sandbox, created 2020-11-21T22:13:02\.796Z.*\): the receipt was created at .* after the verification time/,
    );
    expect(run.stdout).toMatch(/\[skip\].*\n.*apple\.attestation\.receipt: receipt invalid/);
  });
});

describe('verify-file --receipt FILE', () => {
  it('a refreshed receipt, DER, valid after its creation: exit 0 with its risk metric', async () => {
    const run = await verifyFile([
      '--receipt',
      files.file(refreshed.bytes),
      '--at',
      after(refreshed.check.creationTime!.parsed, 5).toISOString(),
      '--app-id',
      v.appId,
      '--json',
    ]);
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout).receipt).toMatchObject({
      valid: true,
      type: 'RECEIPT',
      riskMetric: refreshed.check.riskMetric!.value,
      notBefore: new Date(refreshed.check.notBefore!.parsed).toISOString(),
      problem: null,
    });
  });

  it('base64 text is read too; another app ID or today (signer expired): exit 1 naming the problem', async () => {
    const path = files.file(refreshed.bytes.toString('base64'));
    const at = after(refreshed.check.creationTime!.parsed, 5).toISOString();
    const other = await verifyFile([
      '--receipt',
      path,
      '--at',
      at,
      '--app-id',
      'ABCDE12345.com.other',
    ]);
    expect(other.code).toBe(1);
    expect(other.stdout).toMatch(/receipt: INVALID .*App ID/);
    const today = await verifyFile(['--receipt', path, '--json']);
    expect(today.code).toBe(1);
    expect(JSON.parse(today.stdout).receipt.problem).toMatch(/signer chain/);
  });

  it('the 2020 webauthn4j receipt is rejected (not RFC 5652)', async () => {
    const w = vectors.find((x) => x.name === 'webauthn4j-appattest')!;
    const run = await verifyFile([
      '--receipt',
      files.file(w.receipt),
      '--at',
      after(w.check.fields.creationTime.parsed, 5).toISOString(),
      '--json',
    ]);
    expect(run.code).toBe(1);
    expect(JSON.parse(run.stdout).receipt.problem).toMatch(/CMS signature does not verify/);
  });

  it('usage errors: with a TOKEN too, an unreadable file, not a receipt; no TOKEN at all', async () => {
    const receipt = files.file(refreshed.bytes);
    for (const [args, message] of [
      [[receipt, '--receipt', receipt], /leave out TOKEN/],
      [['--receipt', '/nonexistent/receipt'], /cannot read/],
      [['--receipt', files.file('not base64 !!!')], /neither a receipt/],
      [[], /give the TOKEN file/],
    ] as const) {
      const run = await verifyFile([...args]);
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(message);
    }
  });
});
