/**
 * CPU time per Play Integrity verify and per result token, in process: `process.cpuUsage()` counts
 * every thread, so the libuv pool's WebCrypto jobs are in it (a wall-clock bench hides them); the
 * main thread's share is shown apart. Tokens run `CONCURRENCY` at a time, as under load; each row
 * is the median of `ROUNDS` rounds. The jose rows compare CryptoKey and KeyObject inputs (jose 6
 * turns a KeyObject into a CryptoKey: WebCrypto either way); the `floor:` rows are node:crypto's
 * synchronous primitives on the same token, a yardstick only (the service keeps jose for JOSE).
 * Run: npx tsx bench/googleCpu.ts [filter]
 * Profile: node --cpu-prof --import tsx bench/googleCpu.ts "gms verify"
 * The pool's size changes the figures a lot on few cores: try UV_THREADPOOL_SIZE=1, 2, 4.
 */
import {
  createPrivateKey,
  createPublicKey,
  createDecipheriv,
  createSecretKey,
  randomBytes,
  sign as cryptoSign,
  verify as cryptoVerify,
  randomUUID,
  webcrypto,
  type KeyObject,
} from 'node:crypto';
import { readFileSync } from 'node:fs';
import { compactDecrypt, CompactSign, compactVerify, SignJWT } from 'jose';
import { createGoogleVerifier } from '../src/core/gms/googleVerifier.js';
import { KeyCache } from '../src/core/gms/keyCache.js';
import { openIntegrityToken } from '../src/core/gms/openIntegrityToken.js';
import { parsePlayIntegrityPayload } from '../src/core/gms/playIntegrityPayload.js';
import { createMemoryAllowlist } from '../src/core/memoryStores.js';
import { newResultSigningKey, resultClaims } from '../src/core/resultToken.js';
import { TraceRecorder } from '../src/core/trace.js';
import type { PlatformDetails } from '../src/core/kinds.js';
import { createResultTokenSigner } from '../src/server/resultTokenSigner.js';
import {
  createGoogleTestKeys,
  googleEvidence,
  googlePolicy,
  keyPairOf,
  mintIntegrityToken,
  playIntegrityPayload,
  randomNonce,
} from '../test/support/googleFactory.js';

const ITERATIONS = Number(process.env.ITERATIONS ?? 4000);
const ROUNDS = Number(process.env.ROUNDS ?? 5);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 32);
const filter = process.argv[2];

const now = new Date();
const nonce = randomNonce();
const keys = await createGoogleTestKeys('current');
const policy = googlePolicy(keys);
const allowlist = createMemoryAllowlist({ android: [policy] });
const integrityToken = await mintIntegrityToken({ keys, nonce, now });
const evidence = googleEvidence(integrityToken);
const verifier = createGoogleVerifier({ allowlist });
const keyCache = new KeyCache();
const importPair = keyCache.get.bind(keyCache);
const pair = keyPairOf(keys);
const imported = await keyCache.get(pair);

// the same keys as KeyObjects, for jose's KeyObject input
const aesKeyObject = createSecretKey(Buffer.from(keys.decryptionKey));
const ecKeyObject = createPublicKey({
  key: Buffer.from(keys.verificationKey),
  format: 'der',
  type: 'spki',
});
const JWE_OPTIONS = {
  keyManagementAlgorithms: ['A256KW'],
  contentEncryptionAlgorithms: ['A256GCM'],
  maxDecompressedLength: 0,
};
const jws = (await compactDecrypt(integrityToken, imported.decryptionKey!, JWE_OPTIONS)).plaintext;
const payloadBytes = new TextEncoder().encode(JSON.stringify(playIntegrityPayload({ nonce, now })));

// result tokens: a signer over an in-memory key source (the bench measures signing, not the poll)
const signing = await newResultSigningKey();
const signer = createResultTokenSigner({
  keys: {
    list: async () => [
      {
        id: signing.id,
        publicKey: signing.publicKey,
        signingInMs: -1000,
        retiredMsAgo: null,
      } as never,
    ],
    open: () => new Uint8Array(signing.privateKey),
    createFirst: async () => undefined as never,
  },
  issuer: 'https://attest.bench.example',
  ttlSeconds: 300,
  refreshMs: Number.POSITIVE_INFINITY,
});
const details: PlatformDetails = {
  service: 'gms',
  googleTokenDetails: {
    packageName: 'com.example.bank',
    deviceIntegrityVerdicts: ['MEETS_DEVICE_INTEGRITY', 'MEETS_BASIC_INTEGRITY'],
    timestampMillis: Date.now(),
    appLicensingVerdict: 'LICENSED',
    versionCode: '42',
  },
};
const signInput = {
  apiKeyId: '0h3k5x9q2m7c1b4n',
  approach: 'sessionless' as const,
  nonce: randomBytes(32),
  details,
};
const ecPrivateCryptoKey = await webcrypto.subtle.importKey(
  'pkcs8',
  signing.privateKey,
  { name: 'ECDSA', namedCurve: 'P-256' },
  false,
  ['sign'],
);
const ecPrivateKeyObject: KeyObject = createPrivateKey({
  key: Buffer.from(signing.privateKey),
  format: 'der',
  type: 'pkcs8',
});
const claims = () =>
  resultClaims({
    issuer: 'https://attest.bench.example',
    apiKeyId: signInput.apiKeyId,
    approach: signInput.approach,
    nonce: signInput.nonce,
    details,
    now: Math.floor(Date.now() / 1000),
    ttlSeconds: 300,
    jti: randomUUID(),
  });
const header = { alg: 'ES256', typ: 'attest-result+jwt', kid: signing.id };

const signingInput = new TextEncoder().encode(
  `${Buffer.from(JSON.stringify(header)).toString('base64url')}.${Buffer.from(JSON.stringify(claims())).toString('base64url')}`,
);
const ecdsa = { name: 'ECDSA', hash: 'SHA-256' };

// the same token opened with node:crypto's synchronous primitives (the yardstick rows)
const [jweHeader, encryptedKey, iv, ciphertext, tag] = integrityToken.split('.') as [
  string,
  string,
  string,
  string,
  string,
];
const encryptedKeyBytes = Buffer.from(encryptedKey, 'base64url');
const unwrapSync = () => {
  const d = createDecipheriv(
    'id-aes256-wrap',
    aesKeyObject,
    Buffer.from('A6A6A6A6A6A6A6A6', 'hex'),
  );
  return Buffer.concat([d.update(encryptedKeyBytes), d.final()]);
};
const cek = unwrapSync();
const gcmSync = () => {
  const d = createDecipheriv('aes-256-gcm', cek, Buffer.from(iv, 'base64url'));
  d.setAAD(Buffer.from(jweHeader));
  d.setAuthTag(Buffer.from(tag, 'base64url'));
  return Buffer.concat([d.update(Buffer.from(ciphertext, 'base64url')), d.final()]);
};
const [jwsHeader, jwsPayload, jwsSignature] = new TextDecoder().decode(jws).split('.') as [
  string,
  string,
  string,
];
const jwsInput = Buffer.from(`${jwsHeader}.${jwsPayload}`);
const jwsSignatureBytes = Buffer.from(jwsSignature, 'base64url');
const verifySync = () => {
  const ok = cryptoVerify(
    'sha256',
    jwsInput,
    { key: ecKeyObject, dsaEncoding: 'ieee-p1363' },
    jwsSignatureBytes,
  );
  if (!ok) throw new Error('the yardstick does not verify');
};

const cases: [string, () => unknown][] = [
  [
    'gms verify, warm (the whole classic path)',
    () => verifier.verify(evidence, { nonce, now, trace: new TraceRecorder() }),
  ],
  [
    'openIntegrityToken (JWE + JWS, key cache)',
    () => openIntegrityToken(integrityToken, [pair], importPair),
  ],
  [
    'jose compactDecrypt + compactVerify, CryptoKey',
    async () => {
      const { plaintext } = await compactDecrypt(
        integrityToken,
        imported.decryptionKey!,
        JWE_OPTIONS,
      );
      await compactVerify(plaintext, imported.verificationKey!, { algorithms: ['ES256'] });
    },
  ],
  [
    'jose compactDecrypt, CryptoKey',
    () => compactDecrypt(integrityToken, imported.decryptionKey!, JWE_OPTIONS),
  ],
  [
    'jose compactDecrypt, KeyObject',
    () => compactDecrypt(integrityToken, aesKeyObject, JWE_OPTIONS),
  ],
  [
    'jose compactVerify, CryptoKey',
    () => compactVerify(jws, imported.verificationKey!, { algorithms: ['ES256'] }),
  ],
  [
    'jose compactVerify, KeyObject',
    () => compactVerify(jws, ecKeyObject, { algorithms: ['ES256'] }),
  ],
  ['keyCache.get', () => keyCache.get(pair)],
  ['parsePlayIntegrityPayload', () => parsePlayIntegrityPayload(payloadBytes)],
  ['floor: AES-KW unwrap + AES-GCM + ECDSA verify', () => (unwrapSync(), gcmSync(), verifySync())],
  ['result token: signer.sign', () => signer.sign(signInput)],
  ['result token: resultClaims only', claims],
  [
    'result token: SignJWT, CryptoKey',
    () => new SignJWT(claims() as never).setProtectedHeader(header).sign(ecPrivateCryptoKey),
  ],
  [
    'result token: SignJWT, KeyObject',
    () => new SignJWT(claims() as never).setProtectedHeader(header).sign(ecPrivateKeyObject),
  ],
  [
    'result token: CompactSign of claims JSON, CryptoKey',
    () =>
      new CompactSign(new TextEncoder().encode(JSON.stringify(claims())))
        .setProtectedHeader(header)
        .sign(ecPrivateCryptoKey),
  ],
  [
    'result token: CompactSign of claims JSON, KeyObject',
    () =>
      new CompactSign(new TextEncoder().encode(JSON.stringify(claims())))
        .setProtectedHeader(header)
        .sign(ecPrivateKeyObject),
  ],
  [
    'floor: WebCrypto subtle.sign ES256 alone',
    () => webcrypto.subtle.sign(ecdsa, ecPrivateCryptoKey, signingInput),
  ],
  [
    'floor: node:crypto sign ES256, synchronous',
    () =>
      cryptoSign('sha256', signingInput, { key: ecPrivateKeyObject, dsaEncoding: 'ieee-p1363' }),
  ],
];

/** CPU ticks of the main thread (Linux /proc; 0 elsewhere), to split main thread from the pool. */
function mainThreadMicros(): number {
  try {
    const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / 100; // utime + stime, USER_HZ 100
  } catch {
    return 0;
  }
}

async function run(fn: () => unknown, n: number): Promise<{ all: number; main: number }> {
  let next = 0;
  const worker = async () => {
    while (next < n) {
      next++;
      await fn();
    }
  };
  const main = mainThreadMicros();
  const start = process.cpuUsage();
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const used = process.cpuUsage(start);
  return { all: (used.user + used.system) / n, main: (mainThreadMicros() - main) / n };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

console.log(
  `CPU µs per operation (user+system, all threads), median of ${ROUNDS} x ${ITERATIONS}, ${CONCURRENCY} in flight`,
);
for (const [name, fn] of cases) {
  if (filter && !name.includes(filter)) continue;
  await run(fn, Math.min(ITERATIONS, 500)); // warm-up
  const rounds: number[] = [];
  const mains: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const { all, main } = await run(fn, ITERATIONS);
    rounds.push(all);
    mains.push(main);
  }
  const sorted = [...rounds].sort((a, b) => a - b);
  console.log(
    `${name.padEnd(48)} ${median(rounds).toFixed(1).padStart(7)}   (min ${sorted[0]!.toFixed(1)}, max ${sorted.at(-1)!.toFixed(1)}; main thread ${median(mains).toFixed(0)})`,
  );
}
