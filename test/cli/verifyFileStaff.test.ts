/**
 * `attest verify-file` for analysts (issue 8 items 6-7, issue 11 item 5): token-controlled text
 * never reaches the terminal raw, input limits, keys from files, the nonce rule, unreadable input
 * in words and as a JSON document, the replay hint, `--env` for a stored key, colours.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, truncateSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INPUT_MAX_BYTES } from '../../src/cli/tokenInput.js';
import { encodeCbor, TEST_APP_ID, TEST_NOW } from '../support/appleFactory.js';
import { encodeEnvelope } from '../../src/core/envelope.js';
import {
  createGoogleTestKeys,
  mintIntegrityToken,
  TEST_PACKAGE,
  type GoogleTestKeys,
} from '../support/googleFactory.js';
import { HOSTILE, INERT } from '../support/hostileText.js';
import {
  captureToken,
  gmsToken,
  loadCaptures,
  scratch,
  verifyFile,
} from '../support/verifyFileTokens.js';

const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');
const NONCE = Buffer.alloc(32, 0x4e);
const NO_COLOR = { NO_COLOR: '1' };

let files: ReturnType<typeof scratch>;
let google: GoogleTestKeys;
beforeAll(async () => {
  files = scratch();
  google = await createGoogleTestKeys();
});
afterAll(() => files?.remove());

/** Tokens that carry `payload` in a field verify-file reports. */
const hostileTokens = (payload: string) => ({
  'device.service': encodeCbor(
    new Map<string, unknown>([
      ['v', 1],
      ['nonce', NONCE],
      ['device', new Map([['service', payload]])],
      [payload, new Map()],
    ]),
  ),
  'gms.packageName': gmsToken({ nonce: NONCE, packageName: payload, integrityToken: 'a.b.c.d.e' }),
  'attestation fmt': encodeEnvelope({
    nonce: NONCE,
    service: 'apple',
    evidence: new Map<string, unknown>([
      ['keyId', Buffer.alloc(32, 1)],
      [
        'attestation',
        encodeCbor(
          new Map<string, unknown>([
            ['fmt', payload],
            ['attStmt', new Map()],
            ['authData', Buffer.alloc(37)],
          ]),
        ),
      ],
    ]),
  }),
});

describe('hostile text from the token', () => {
  for (const [name, payload] of Object.entries(HOSTILE)) {
    it(`is escaped in the text report (${name}), and kept exact in --json`, async () => {
      for (const [field, token] of Object.entries(hostileTokens(payload))) {
        const path = files.file(token);
        const flags = ['--app-id', TEST_APP_ID, '--at', TEST_NOW.toISOString()];
        const text = await verifyFile([path, ...flags], NO_COLOR);
        expect(text.code, field).toBe(1);
        expect(text.stdout, field).toMatch(/\nREJECTED: /);
        for (const line of text.stdout.split('\n')) expect(line, field).toMatch(INERT);
        // exactly one verdict line: the token cannot draw a second one
        expect(text.stdout.match(/^(VALID|REJECTED)/gm), field).toHaveLength(1);

        const json = await verifyFile([path, ...flags, '--json']);
        expect(json.json, field).toBeDefined();
        // a staff terminal or a log shipper reading it never gets a C1, bidi or separator raw
        for (const line of json.stdout.split('\n')) expect(line, field).toMatch(INERT);
        const doc = JSON.stringify(json.json);
        // the payload is still there, as JSON escapes: nothing lost for a script
        expect(
          doc.includes(JSON.stringify(payload.slice(0, 8)).slice(1, -1)) ||
            doc.includes(payload.slice(0, 8)),
          field,
        ).toBe(true);
      }
    });
  }
});

describe('input limits', () => {
  it(`refuses a file over ${INPUT_MAX_BYTES / 1024} KiB before reading it`, async () => {
    const path = files.file('', 'huge.b64');
    truncateSync(path, 200 * 1024 * 1024); // sparse: reading it would take 200 MB
    const run = await verifyFile([path, '--json']);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(
      /huge\.b64 is 209715200 bytes, more than verify-file reads \(128 KiB/,
    );
    expect(run.json).toMatchObject({ valid: false, error: 'input_unreadable' });
  });

  it.skipIf(!existsSync('/dev/zero'))(
    'refuses an endless device before reading from it',
    async () => {
      const run = await verifyFile(['/dev/zero']);
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(/\/dev\/zero is a character device, not a regular file/);
    },
  );

  it('reads a token of the service maximum as base64 text', async () => {
    const run = await verifyFile([
      files.file(`${b64(randomBytes(90 * 1024))}\n`),
      '--app-id',
      TEST_APP_ID,
    ]);
    expect(run.code).toBe(1); // read, and rejected as no token: not refused as too large
    expect(run.stdout).toMatch(/token_malformed/);
  });
});

describe('unreadable input', () => {
  it.each([
    [
      'an unreadable file',
      () => join(files.dir, 'missing.cbor'),
      /cannot read .*missing\.cbor \(ENOENT\)/,
    ],
    [
      'text that is not base64',
      () => files.file('this is not a token!\n'),
      /neither a CBOR token nor base64 text: text with "!" at character 20/,
    ],
    [
      'JSON that is not a verify request body',
      () => files.file('{"hello":1}'),
      /is JSON without an "attestationToken" string: give a saved verify request body/,
    ],
    [
      'binary that is not a CBOR map',
      () => files.file(Uint8Array.of(0x1f, 0x8b, 0x08, 0x00)),
      /binary data whose first byte 0x1f starts an unsigned integer in CBOR, and a token is a CBOR map/,
    ],
    ['an empty file', () => files.file(''), /is empty/],
    ['a directory', () => files.dir, /is a directory/],
  ] as const)(
    '%s: one line in words, and a JSON document with --json',
    async (_name, path, message) => {
      const text = await verifyFile([path()]);
      expect(text.code).toBe(2);
      expect(text.stderr.trim().split('\n')).toHaveLength(1);
      expect(text.stderr).toMatch(message);
      const json = await verifyFile([path(), '--json']);
      expect(json.code).toBe(2);
      expect(json.json).toMatchObject({ valid: false, error: 'input_unreadable' });
      expect((json.json as unknown as { detail: string }).detail).toMatch(message);
    },
  );

  it('a CBOR map that is garbage inside is described in words', async () => {
    const run = await verifyFile([
      files.file(Uint8Array.of(0xbd, 0x00, 0x01)),
      '--json',
      '--app-id',
      TEST_APP_ID,
    ]);
    expect(run.json).toMatchObject({ valid: false, reason: 'token_malformed' });
    expect(run.json!.detail).toMatch(
      /byte 0xbd at offset 0 starts no CBOR item .*not CBOR, or corrupted/,
    );
    expect(run.json!.detail).not.toMatch(/^CBOR: reserved additional information/);
  });
});

describe('keys from files', () => {
  it('--decryption-key-file / --verification-key-file verify as the inline keys do', async () => {
    const nonce = randomBytes(32);
    const integrityToken = await mintIntegrityToken({ keys: google, nonce, now: TEST_NOW });
    const path = files.file(gmsToken({ nonce, packageName: TEST_PACKAGE, integrityToken }));
    const dec = files.file(`${b64(google.decryptionKey)}\n`);
    const ver = files.file(`${b64(google.verificationKey)}\n`);
    const common = [
      path,
      '--json',
      '--nonce',
      b64(nonce),
      '--at',
      TEST_NOW.toISOString(),
      '--package',
      TEST_PACKAGE,
    ];
    const fromFiles = await verifyFile([
      ...common,
      '--decryption-key-file',
      dec,
      '--verification-key-file',
      ver,
    ]);
    expect(fromFiles.stderr).toBe('');
    expect(fromFiles.json?.valid).toBe(true);
    const inline = await verifyFile([
      ...common,
      '--decryption-key',
      b64(google.decryptionKey),
      '--verification-key',
      b64(google.verificationKey),
    ]);
    expect(inline.json?.valid).toBe(true);
  });
});

describe('a registered key (--apple-key)', () => {
  const capture = loadCaptures().find(
    (c) => c.assertions.length > 0 && c.id !== 'thedhejavu-appattest-rs',
  )!;
  const assertion = capture.assertions[0]!;
  const run = (...flags: string[]) =>
    verifyFile([
      files.file(captureToken(capture, { assertion: assertion.assertion })),
      '--json',
      '--apple-key',
      assertion.publicKeyPem,
      '--app-id',
      capture.appId,
      '--client-data-hash',
      assertion.clientDataHash,
      ...flags,
    ]);

  it('--env says which environment the stored key had (Production by default)', async () => {
    const counter = String(assertion.expectedCounter - 1);
    expect((await run('--counter', counter)).json?.details).toMatchObject({
      appleTokenDetails: { environment: 'Production' },
    });
    expect((await run('--counter', counter, '--env', 'development')).json?.details).toMatchObject({
      appleTokenDetails: { environment: 'Development' },
    });
  });

  it('apple_counter_replay says what it usually means: a replayed request, or a cloned key', async () => {
    const same = await run('--counter', String(assertion.expectedCounter));
    expect(same.json?.hints).toEqual([
      {
        code: 'counter_replay',
        message: expect.stringMatching(
          /counter \d+ is the one already accepted .*replayed request/,
        ),
      },
    ]);
    const above = await run('--counter', String(assertion.expectedCounter + 5));
    expect(above.json?.hints).toEqual([
      {
        code: 'counter_replay',
        message: expect.stringMatching(/below the \d+ already accepted .*cloned key/),
      },
    ]);
    const text = await verifyFile(
      [
        files.file(captureToken(capture, { assertion: assertion.assertion })),
        '--apple-key',
        assertion.publicKeyPem,
        '--app-id',
        capture.appId,
        '--client-data-hash',
        assertion.clientDataHash,
        '--counter',
        String(assertion.expectedCounter),
      ],
      NO_COLOR,
    );
    expect(text.stdout).toMatch(/hint \(counter_replay\)/);
    expect(text.stdout).not.toMatch(/no common integration mistake explains it/);
  });
});

describe('colours', () => {
  const withTty = async <T>(fn: () => Promise<T>): Promise<T> => {
    const saved = Object.getOwnPropertyDescriptor(process.stdout, 'isTTY');
    Object.defineProperty(process.stdout, 'isTTY', { value: true, configurable: true });
    try {
      return await fn();
    } finally {
      if (saved) Object.defineProperty(process.stdout, 'isTTY', saved);
      else delete (process.stdout as { isTTY?: boolean }).isTTY;
    }
  };

  it('mark pass / FAIL / skip and the verdict on a terminal, not with NO_COLOR or in a pipe', async () => {
    const path = files.file(captureToken(loadCaptures().find((c) => c.attestation)!));
    const args = [path, '--app-id', TEST_APP_ID];
    const tty = await withTty(() => verifyFile(args, { NO_COLOR: undefined }));
    expect(tty.stdout).toContain('[\u001b[31m\u001b[1mFAIL\u001b[22m\u001b[39m]');
    expect(tty.stdout).toContain('\u001b[32mpass\u001b[39m');
    expect(tty.stdout).toMatch(/\u001b\[31m\u001b\[1mREJECTED/);
    const noColor = await withTty(() => verifyFile(args, NO_COLOR));
    expect(noColor.stdout).not.toContain('\u001b');
    const pipe = await verifyFile(args, { NO_COLOR: undefined });
    expect(pipe.stdout).not.toContain('\u001b');
  });
});
