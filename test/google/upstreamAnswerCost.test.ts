/**
 * What a hostile or broken Google answer costs attest: at most 5 times a garbage token's. Google
 * runs in a child process (its CPU is not attest's), on 127.0.0.1; each decode is attest's client
 * reading the answer and the core parsing its payload, as the verifiers do. Costs are the CPU
 * time of this process (process.cpuUsage), not wall time, over interleaved rounds; the ratio is
 * the median round's, so a busy machine or a garbage collection in one round does not decide it.
 *
 * - garbage: Google refuses the token (400 INVALID_ARGUMENT, a few hundred bytes).
 * - hostile: a 200 whose answer is 800 KB of nested JSON (35 times a garbage token's cost when
 *   the client read up to 1 MiB and parsed it).
 * - largest: a 200 of nested JSON just under the cap, read and parsed whole.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parsePlayIntegrityJson } from '../../src/core/gms/playIntegrityPayload.js';
import { parsePcIntegrityPayload } from '../../src/core/gmsPc/pcPayload.js';
import {
  createPlayIntegrityClient,
  GOOGLE_MAX_ANSWER_BYTES,
} from '../../src/upstream/playIntegrityClient.js';
import { createTestServiceAccount } from '../support/fakeGoogle.js';

// the answers, made in the child: 800 KB of nesting, and nesting that fills the cap but for a
// few bytes of framing
const GOOGLE = `
const http = require('node:http');
const cap = Number(process.argv[1]);
const nested = (bytes) => {
  const depth = Math.floor((bytes - 64) / 2);
  return '{"tokenPayloadExternal":{"requestDetails":' + '['.repeat(depth) + ']'.repeat(depth) + '}}';
};
const hostile = nested(800 * 1024);
const largest = nested(cap);
const refusal = JSON.stringify({ error: { code: 400, message: 'Integrity token cannot be decoded.', status: 'INVALID_ARGUMENT' } });
http.createServer((req, res) => {
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    if (req.url === '/token') {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      return res.end(JSON.stringify({ access_token: 'ya29.test', expires_in: 3600, token_type: 'Bearer' }));
    }
    const token = JSON.parse(body).integrity_token ?? JSON.parse(body).integrityToken;
    const answer = token === 'hostile' ? hostile : token === 'largest' ? largest : refusal;
    res.writeHead(token === 'garbage' ? 400 : 200, { 'Content-Type': 'application/json' });
    res.end(answer);
  });
}).listen(0, '127.0.0.1', function () { process.stdout.write(String(this.address().port) + '\\n'); });
`;

let google: ChildProcess;
let url: string;
beforeAll(async () => {
  google = spawn(process.execPath, ['-e', GOOGLE, String(GOOGLE_MAX_ANSWER_BYTES)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [chunk] = (await once(google.stdout!, 'data')) as [Buffer];
  url = `http://127.0.0.1:${chunk.toString().trim()}`;
});
afterAll(() => {
  google?.kill();
});

type Kind = 'garbage' | 'hostile' | 'largest';

describe('the cost of an upstream answer', () => {
  it.each(['decodeIntegrityToken', 'decodePcIntegrityToken'] as const)(
    '%s: the worst answer costs at most 5x a garbage token (CPU time)',
    async (method) => {
      const client = createPlayIntegrityClient({
        oauthUrl: `${url}/token`,
        playIntegrityUrl: url,
        timeoutMs: 20_000,
        maxInFlight: 4,
      });
      const account = createTestServiceAccount().account;
      const parse =
        method === 'decodePcIntegrityToken' ? parsePcIntegrityPayload : parsePlayIntegrityJson;
      /** one verify's share of Google: the decode, then the payload's checks */
      const once = async (kind: Kind) => {
        try {
          const answer = await client.decode({
            packageName: 'com.example.app',
            integrityToken: kind,
            serviceAccount: account,
            method,
          });
          if (answer.ok) parse(answer.payload);
          return answer.ok ? 'ok' : 'refused';
        } catch (err) {
          return (err as { code?: string }).code ?? 'thrown';
        }
      };
      // what each answer comes to: garbage is refused, an over-long answer a fault, the largest
      // one read whole (and its payload refused by the checks)
      expect(await once('garbage')).toBe('refused');
      expect(await once('hostile')).toBe('bad_response');
      expect(await once('largest')).toBe('ok');

      const cpu = async (kind: Kind, n: number) => {
        const start = process.cpuUsage();
        for (let i = 0; i < n; i++) await once(kind);
        const used = process.cpuUsage(start);
        return (used.user + used.system) / n;
      };
      for (const kind of ['garbage', 'hostile', 'largest'] as const) await cpu(kind, 10); // warm
      const ratios: { hostile: number; largest: number; garbageUs: number }[] = [];
      for (let round = 0; round < 7; round++) {
        const garbage = await cpu('garbage', 20);
        const hostile = await cpu('hostile', 20);
        const largest = await cpu('largest', 20);
        ratios.push({ hostile: hostile / garbage, largest: largest / garbage, garbageUs: garbage });
      }
      const median = (values: number[]) => values.sort((a, b) => a - b)[values.length >> 1]!;
      const hostile = median(ratios.map((r) => r.hostile));
      const largest = median(ratios.map((r) => r.largest));
      expect(hostile, JSON.stringify(ratios)).toBeLessThanOrEqual(5);
      expect(largest, JSON.stringify(ratios)).toBeLessThanOrEqual(5);
    },
    120_000,
  );
});
