/**
 * Log lines shaped like the server's pino output (the README's Logs section), built in code so each test
 * states the fields it depends on. `sampleLog` makes a deterministic, realistic mix for the
 * viewer tests and for trying the viewer by hand.
 */

/** Fields of a request line; anything given replaces the default. */
export type RequestFields = Record<string, unknown>;

let counter = 0;

/**
 * One request line as pino writes it.
 * @param fields - fields to set or override (`undefined` removes a default)
 */
export function requestLine(fields: RequestFields = {}): string {
  counter++;
  const base: RequestFields = {
    level: 30,
    time: '2026-11-22T21:00:00.000Z',
    pid: 1,
    hostname: 'attest-1',
    msg: 'request',
    requestId: `req-${String(counter).padStart(6, '0')}`,
    method: 'POST',
    route: '/api/v1/attestation/verify',
    status: 200,
    durationMs: 3.2,
    apiKeyId: 'k3x9a0b1c2d3e4f5',
    approach: 'session',
    service: 'apple',
    isValid: true,
  };
  const merged: RequestFields = { ...base, ...fields };
  for (const k of Object.keys(merged)) if (merged[k] === undefined) delete merged[k];
  return JSON.stringify(merged);
}

/** A line that is not a request ("listening", warnings, errors). */
export const plainLine = (level: number, msg: string, extra: RequestFields = {}): string =>
  JSON.stringify({
    level,
    time: '2026-11-22T21:00:00.000Z',
    pid: 1,
    hostname: 'attest-1',
    msg,
    ...extra,
  });

const REJECTIONS: readonly {
  service: 'apple' | 'gms';
  reason: string;
  detail: string;
  weight: number;
}[] = [
  {
    service: 'apple',
    reason: 'apple_counter_replay',
    detail: 'counter 3 is not above the stored 5',
    weight: 9,
  },
  {
    service: 'apple',
    reason: 'apple_nonce_mismatch',
    detail: 'nonce extension does not match SHA-256(authData || clientDataHash)',
    weight: 5,
  },
  {
    service: 'apple',
    reason: 'apple_environment_not_allowed',
    detail: 'aaguid appattestdevelop is not allowed for TEAMID1234.com.example.app',
    weight: 3,
  },
  {
    service: 'apple',
    reason: 'apple_key_unknown',
    detail: 'no registered key with this key id',
    weight: 2,
  },
  {
    service: 'gms',
    reason: 'gms_token_stale',
    detail: 'timestampMillis is 912 s old, more than 600 s',
    weight: 7,
  },
  {
    service: 'gms',
    reason: 'gms_integrity_insufficient',
    detail: 'deviceRecognitionVerdict [] is below MEETS_DEVICE_INTEGRITY',
    weight: 4,
  },
  {
    service: 'gms',
    reason: 'gms_app_not_recognized',
    detail: 'appRecognitionVerdict UNRECOGNIZED_VERSION',
    weight: 2,
  },
  { service: 'apple', reason: 'session_expired', detail: 'session expired 41 s ago', weight: 2 },
  {
    service: 'gms',
    reason: 'nonce_mismatch',
    detail: 'the final nonce does not match the token nonce',
    weight: 2,
  },
];

const API_KEYS = ['k3x9a0b1c2d3e4f5', 'm7q2w8e4r5t6y7u8', 'p0s9d8f7g6h5j4k3'];

/** A small deterministic PRNG (mulberry32), so the sample is the same on every run. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * A realistic log: start-up lines, then `count` requests a few hundred milliseconds apart:
 * inits, valid and rejected verifications of both platforms with several reasons and API keys,
 * a few 401/403, one 500 with its error line, and two lines that are not JSON.
 * @param count - requests to generate
 * @param seed - PRNG seed
 * @param startMs - time of the first line
 */
export function sampleLog(
  count: number,
  seed = 7,
  startMs = Date.parse('2026-11-22T21:00:00.000Z'),
): string[] {
  const random = rng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)] as T;
  const totalWeight = REJECTIONS.reduce((n, r) => n + r.weight, 0);
  const pickRejection = () => {
    let x = random() * totalWeight;
    for (const r of REJECTIONS) if ((x -= r.weight) < 0) return r;
    return REJECTIONS[0] as (typeof REJECTIONS)[number];
  };
  const b64 = (n: number) =>
    Buffer.from(Array.from({ length: n }, () => Math.floor(random() * 256))).toString('base64');
  const appleKeys = Array.from({ length: 6 }, () => b64(32));
  let t = startMs;
  const iso = () => new Date(t).toISOString();
  const lines: string[] = [
    plainLine(30, 'migrations applied', { time: iso(), applied: 0 }),
    plainLine(40, 'apple root override', { time: iso(), path: '/etc/attest/test-roots.pem' }),
    plainLine(30, 'listening', { time: iso(), host: '0.0.0.0', port: 8080 }),
  ];
  for (let i = 0; i < count; i++) {
    t += Math.floor(50 + random() * 900);
    const apiKeyId = pick(API_KEYS);
    const x = random();
    const id = `0192f3a1-${b64(6).replace(/[+/=]/g, 'x')}-${String(i).padStart(5, '0')}`;
    if (x < 0.2) {
      lines.push(
        requestLine({
          time: iso(),
          requestId: id,
          route: '/api/v1/attestation/init',
          apiKeyId,
          durationMs: 1.1,
          approach: undefined,
          service: undefined,
          isValid: undefined,
        }),
      );
      continue;
    }
    if (x < 0.23) {
      const status = random() < 0.5 ? 401 : 403;
      const auth = status === 401 ? 'missing' : pick(['unknown', 'revoked', 'expired']);
      lines.push(
        requestLine({
          time: iso(),
          requestId: id,
          status,
          auth,
          apiKeyId: undefined,
          approach: undefined,
          service: undefined,
          isValid: undefined,
          durationMs: 0.4,
        }),
      );
      continue;
    }
    if (i === Math.floor(count / 2)) {
      lines.push(
        plainLine(50, 'verify failed', {
          time: iso(),
          requestId: id,
          err: {
            type: 'Error',
            message: 'connection terminated unexpectedly',
            stack:
              'Error: connection terminated unexpectedly\n    at Connection.<anonymous> (node_modules/postgres/src/connection.js:410:14)',
          },
        }),
      );
      lines.push(
        requestLine({
          time: iso(),
          requestId: id,
          status: 500,
          apiKeyId,
          isValid: undefined,
          service: undefined,
          approach: undefined,
          durationMs: 12.9,
          err: { type: 'Error', message: 'connection terminated unexpectedly' },
        }),
      );
      lines.push(
        '    at process.processTicksAndRejections (node:internal/process/task_queues:95:5)',
      );
      continue;
    }
    const approach = random() < 0.7 ? 'session' : 'sessionless';
    const durationMs = Math.round((2 + random() * 30) * 10) / 10;
    if (random() < 0.62) {
      const service = random() < 0.55 ? 'apple' : 'gms';
      const device =
        service === 'apple' ? { keyId: pick(appleKeys) } : { packageName: 'com.example.shop' };
      lines.push(
        requestLine({
          time: iso(),
          requestId: id,
          apiKeyId,
          approach,
          service,
          isValid: true,
          durationMs,
          ...device,
        }),
      );
    } else {
      const r = pickRejection();
      const device =
        r.service === 'apple'
          ? { keyId: pick(appleKeys) }
          : { packageName: random() < 0.8 ? 'com.example.shop' : 'com.example.beta' };
      lines.push(
        requestLine({
          time: iso(),
          requestId: id,
          apiKeyId,
          approach,
          service: r.service,
          isValid: false,
          reason: r.reason,
          detail: r.detail,
          durationMs,
          ...device,
        }),
      );
    }
  }
  lines.push('Killed');
  return lines;
}
