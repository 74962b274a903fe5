/**
 * `attest token wrap` on real evidence (a captured App Attest attestation, a sealed Play
 * Integrity JWE), checked by `verify-file` offline; and `verify-file` naming raw evidence, an
 * empty file and a saved verify request body instead of refusing them as "not a token".
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeCbor } from '../../src/core/envelope.js';
import {
  createTestPlayKeys,
  sealIntegrityToken,
  verdictPayload,
} from '../../src/core/dev/playIntegrityMint.js';
import { oneLine, runCli } from '../support/cli.js';
import { loadCaptures, scratch, verifyFile } from '../support/verifyFileTokens.js';

const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');
const capture = loadCaptures().find((c) => c.id === 'uebelack-node-app-attest-production')!;
const PACKAGE = 'com.example.wrapped';

let files: ReturnType<typeof scratch>;
beforeAll(() => {
  files = scratch('attest-wrap-');
});
afterAll(() => files?.remove());

describe('token wrap apple', () => {
  it.each([
    ['raw CBOR', () => Buffer.from(capture.attestation!, 'base64')],
    ['base64 text', () => `${capture.attestation!}\n`],
  ])(
    'wraps a captured attestation (%s) into a token verify-file accepts',
    async (_form, content) => {
      const nonce = b64(randomBytes(32));
      const wrapped = await runCli(
        'token',
        'wrap',
        'apple',
        '--key-id',
        capture.keyId,
        '--attestation',
        files.file(content()),
        '--nonce',
        nonce,
        '--json',
      );
      expect(wrapped.code).toBe(0);
      const out = JSON.parse(wrapped.stdout) as { token: string; keyId: string };
      expect(Object.keys(out)).toEqual(['token', 'keyId']);
      expect(out.keyId).toBe(capture.keyId);
      // the capture's clientDataHash is not SHA-256 of any nonce we choose: verify-file replaces it
      const run = await verifyFile([
        files.file(out.token),
        '--nonce',
        nonce,
        '--app-id',
        capture.appId,
        '--at',
        capture.verifyAt!,
        '--client-data-hash',
        capture.clientDataHash!,
        '--json',
      ]);
      expect(run.json).toMatchObject({
        valid: true,
        nonceChecked: true,
        facts: { shape: 'registration', keyId: capture.keyId },
      });
    },
  );

  it('refuses a wrong key id, no object, or a file that is not an App Attest object, in one line (exit 2)', async () => {
    const att = files.file(Buffer.from(capture.attestation!, 'base64'));
    const cases: [string[], RegExp][] = [
      [
        ['--key-id', b64(randomBytes(16)), '--attestation', att, '--nonce', b64(randomBytes(32))],
        /--key-id must be base64 of 32 bytes/,
      ],
      [
        ['--key-id', capture.keyId, '--nonce', b64(randomBytes(32))],
        /give --attestation <file>, --assertion <file>, or both/,
      ],
      [
        [
          '--key-id',
          capture.keyId,
          '--attestation',
          files.file('hello'),
          '--nonce',
          b64(randomBytes(32)),
        ],
        /neither a CBOR object nor its base64 text/,
      ],
      [['--key-id', capture.keyId, '--attestation', att], /give the nonce/],
      [
        ['--key-id', capture.keyId, '--attestation', att, '--nonce', b64(randomBytes(8))],
        /final nonce must be 16 to 512 bytes/,
      ],
    ];
    for (const [args, message] of cases) {
      const run = await runCli('token', 'wrap', 'apple', ...args);
      expect(run.code).toBe(2);
      expect(oneLine(run)).toMatch(message);
    }
  });
});

describe('token wrap gms', () => {
  it('wraps an integrity token (session nonce) into a token verify-file accepts with the package keys', async () => {
    const keys = createTestPlayKeys();
    const serverNonce = randomBytes(32);
    const deviceNonce = randomBytes(8);
    const finalNonce = Buffer.concat([serverNonce, deviceNonce]);
    const jwe = await sealIntegrityToken(
      keys,
      verdictPayload({
        packageName: PACKAGE,
        nonce: finalNonce,
        issuedAt: new Date(),
        deviceVerdicts: ['MEETS_DEVICE_INTEGRITY'],
        recognition: 'PLAY_RECOGNIZED',
        certificateDigests: [],
      }),
    );
    const wrapped = await runCli(
      'token',
      'wrap',
      'gms',
      '--package',
      PACKAGE,
      '--integrity-token',
      files.file(`${jwe}\n`),
      '--server-nonce',
      b64(serverNonce),
      '--device-nonce',
      b64(deviceNonce),
    );
    expect(wrapped.code).toBe(0);
    const run = await verifyFile([
      files.file(wrapped.stdout),
      '--server-nonce',
      b64(serverNonce),
      '--device-nonce',
      b64(deviceNonce),
      '--package',
      PACKAGE,
      '--decryption-key',
      b64(keys.decryptionKey),
      '--verification-key',
      b64(keys.verificationKey),
      '--json',
    ]);
    expect(run.json).toMatchObject({
      valid: true,
      details: { googleTokenDetails: { packageName: PACKAGE } },
    });
  });

  it('refuses a file that is not a compact JWE', async () => {
    const run = await runCli(
      'token',
      'wrap',
      'gms',
      '--package',
      PACKAGE,
      '--integrity-token',
      files.file('a.b.c'),
      '--nonce',
      b64(randomBytes(32)),
    );
    expect(run.code).toBe(2);
    expect(oneLine(run)).toMatch(/does not hold a compact JWE/);
  });
});

describe('verify-file input forms', () => {
  it.each([
    [
      'a raw App Attest attestation object',
      () => Buffer.from(capture.attestation!, 'base64'),
      /raw App Attest attestation object.*attest token wrap apple --key-id <b64> --attestation /,
    ],
    [
      'its base64 text',
      () => capture.attestation!,
      /raw App Attest attestation object.*attest token wrap apple/,
    ],
    [
      'a raw Play Integrity JWE',
      () => 'eyJhbGciOiJBMjU2S1ciLCJlbmMiOiJBMjU2R0NNIn0.AAAA.BBBB.CCCC.DDDD\n',
      /raw Play Integrity integrity token \(a JWE\).*attest token wrap gms --package <name> --integrity-token /,
    ],
    ['an empty file', () => '', /is empty/],
    ['whitespace only', () => ' \n', /is empty/],
    [
      'JSON without attestationToken',
      () => '{"expectedNonce":"AAAA"}',
      /without an "attestationToken" string/,
    ],
  ])('names %s and what to run (exit 2, one line)', async (_name, content, message) => {
    const run = await verifyFile([files.file(content()), '--app-id', capture.appId]);
    expect(run.code).toBe(2);
    expect(oneLine(run)).toMatch(message);
  });

  it('a raw assertion object is named too', async () => {
    // an assertion object as a device gives it: signature and authenticatorData
    const assertion = encodeCbor(
      new Map<string, unknown>([
        ['signature', randomBytes(70)],
        ['authenticatorData', randomBytes(37)],
      ]),
    );
    const run = await verifyFile([files.file(assertion), '--app-id', capture.appId]);
    expect(run.code).toBe(2);
    expect(oneLine(run)).toMatch(/raw App Attest assertion object.*--assertion /);
  });

  it('a saved verify request body is verified with its expectedNonce', async () => {
    const nonce = randomBytes(32);
    const wrapped = await runCli(
      'token',
      'wrap',
      'apple',
      '--key-id',
      capture.keyId,
      '--attestation',
      files.file(capture.attestation!),
      '--nonce',
      b64(nonce),
    );
    const body = (expectedNonce: Uint8Array) =>
      files.file(
        JSON.stringify({
          attestationToken: wrapped.stdout.trim(),
          expectedNonce: b64(expectedNonce),
        }),
      );
    const common = [
      '--app-id',
      capture.appId,
      '--at',
      capture.verifyAt!,
      '--client-data-hash',
      capture.clientDataHash!,
      '--json',
    ];
    expect((await verifyFile([body(nonce), ...common])).json).toMatchObject({
      valid: true,
      nonceChecked: true,
    });
    expect((await verifyFile([body(randomBytes(32)), ...common])).json).toMatchObject({
      valid: false,
      reason: 'nonce_mismatch',
    });
  });
});
