/**
 * A database failover with real parts: a PostgreSQL primary and its synchronous standby (the
 * machine's PostgreSQL binaries, test/support/replicaPair.ts), two attest instances on one URL
 * naming both (`?target_session_attrs=read-write`), and load on both: sessions made and verified,
 * assertion counters, result tokens consumed. The primary's postmaster is SIGKILLed, the standby
 * promoted a second later, and the test, as a failover manager does when no standby is left,
 * clears the new primary's synchronous_standby_names a second after that (until then its commits
 * wait for a standby that is not there). A ledger of every acknowledged answer is then checked
 * on the new primary: nothing acknowledged is lost, nothing is applied twice, every answer in
 * between was 200 or 503 with Retry-After (never a 500, never a hang), and both instances serve
 * verifies again within 10 s of the promotion, without a restart.
 */
import { createHash, randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createDevCa,
  createSimulatedKey,
  mintAssertion,
  mintAttestation,
  type SimulatedKey,
} from '../../src/core/dev/devCa.js';
import { encodeAppleToken } from '../../src/core/apple/appleToken.js';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { openDatabase } from '../../src/db/client.js';
import type { DatabaseHandle } from '../../src/db/database.js';
import { createDevCaRepository } from '../../src/db/devCa.js';
import { replicaPairMissing, startReplicaPair, type ReplicaPair } from '../support/replicaPair.js';
import { TEST_SECRETS } from '../support/secrets.js';
import { issueKey } from '../support/service.js';
import { nextChange, startInstance, type Instance } from '../support/twoInstances.js';

const missing = replicaPairMissing();
const ISSUER = 'https://attest.example.com';
const APP = 'ABCDE12345.com.example.failover';
const WORKERS = 6;

const sha256 = (...parts: Uint8Array[]) => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest();
};
const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');

interface Answer {
  status: number;
  retryAfter: string | null;
  ms: number;
  at: number;
  body: Record<string, unknown> | undefined;
}

describe.skipIf(missing)(
  missing ? `failover (skipped: ${missing})` : 'failover: primary killed, standby promoted',
  () => {
    let pair: ReplicaPair;
    let a: Instance;
    let b: Instance;
    let db: DatabaseHandle;
    let key: string;
    let ca: Awaited<ReturnType<typeof createDevCa>>;

    beforeAll(async () => {
      pair = await startReplicaPair();
      // attest connects as a role of its own, as in production (not a superuser: the failover
      // manager's reserved connections stay its own)
      const admin = postgres(pair.adminUrl(pair.primaryPort), { max: 1, onnotice: () => {} });
      await admin.unsafe('create role attest login');
      await admin.unsafe('create database attest owner attest');
      await admin.end();
      const url =
        `postgres://attest@127.0.0.1:${pair.primaryPort},127.0.0.1:${pair.standbyPort}/attest` +
        '?target_session_attrs=read-write';
      a = await startInstance(url, 600_000, { issuer: ISSUER });
      b = await startInstance(url, 600_000, { issuer: ISSUER });
      db = await openDatabase({ url, dataDir: '', role: 'server' });
      ({ key } = await issueKey(db, { name: 'failover', mode: 'test', resultTokens: true }));
      ({ ca } = await createDevCaRepository(db.db, TEST_SECRETS).put(
        await createDevCa(new Date()),
        {
          replace: false,
        },
      ));
      const heard = Promise.all([nextChange(a, 'apple_apps'), nextChange(b, 'apple_apps')]);
      await createAllowlistRepository(db.db, null).addApple(APP, undefined);
      await heard;
    }, 60_000);

    afterAll(async () => {
      await a?.server.close();
      await b?.server.close();
      await db?.close();
      pair?.stop();
    });

    /** POST with the test key; a fetch that fails (reset, refused) is status 0 */
    async function post(i: Instance, path: string, body?: unknown): Promise<Answer> {
      const started = performance.now();
      try {
        const res = await fetch(`${i.server.url}${path}`, {
          method: 'POST',
          headers: { 'X-Api-Key': key, 'Content-Type': 'application/json' },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
          signal: AbortSignal.timeout(15_000),
        });
        const text = await res.text();
        return {
          status: res.status,
          retryAfter: res.headers.get('retry-after'),
          ms: performance.now() - started,
          at: performance.now(),
          body: res.status === 200 ? (JSON.parse(text) as Record<string, unknown>) : undefined,
        };
      } catch {
        return {
          status: 0,
          retryAfter: null,
          ms: performance.now() - started,
          at: performance.now(),
          body: undefined,
        };
      }
    }

    async function registration(nonce: Buffer) {
      const device = createSimulatedKey();
      const attestation = await mintAttestation(ca, device, {
        appId: APP,
        environment: 'Production',
        clientDataHash: sha256(nonce),
        now: new Date(),
      });
      return { device, token: encodeAppleToken({ nonce, keyId: device.keyId, attestation }) };
    }

    function assertionBody(device: SimulatedKey, counter: number) {
      const nonce = randomBytes(32);
      const assertion = mintAssertion(device, {
        appId: APP,
        counter,
        clientDataHash: sha256(nonce),
      });
      return {
        attestationToken: b64(encodeAppleToken({ nonce, keyId: device.keyId, assertion })),
        expectedNonce: b64(nonce),
      };
    }

    it('loses nothing acknowledged, doubles nothing, answers 200 or 503 + Retry-After throughout, and both instances serve within 10 s of the promotion', async () => {
      // the ledger: what an instance acknowledged
      const sessions: string[] = [];
      // when each session's init was answered
      const initAt = new Map<string, number>();
      const verified: { reference: string; body: unknown }[] = [];
      const consumed: { token: string; jti: string }[] = [];
      const counters = new Map<SimulatedKey, { counter: number; body: unknown }>();
      const answers: Answer[] = [];
      const record = (answer: Answer) => (answers.push(answer), answer);

      // one registered device per worker, for its assertions
      const devices: SimulatedKey[] = [];
      for (let w = 0; w < WORKERS; w++) {
        const nonce = randomBytes(32);
        const { device, token } = await registration(nonce);
        const r = await post(w % 2 ? b : a, '/api/v1/attestation/verify', {
          attestationToken: b64(token),
          expectedNonce: b64(nonce),
        });
        expect(r.body?.isValid).toBe(true);
        devices.push(device);
      }

      let stop = false;
      let promotedAt = Infinity;
      // per instance: the first valid verify of a session made after the promotion
      const servedAt = new Map<Instance, number>();
      const worker = async (w: number) => {
        const device = devices[w]!;
        let counter = 0;
        for (let round = 0; !stop; round++) {
          const i = (w + round) % 2 ? b : a;
          // a session: init, then its verify, then the result token consumed
          const init = record(await post(i, '/api/v1/attestation/init'));
          if (init.status === 200) {
            const reference = init.body!.sessionReference as string;
            sessions.push(reference);
            initAt.set(reference, init.at);
            const { token } = await registration(
              Buffer.from(init.body!.serverNonce as string, 'base64'),
            );
            const body = { attestationToken: b64(token), sessionReference: reference };
            const v = record(await post(i, '/api/v1/attestation/verify', body));
            if (v.status === 200 && v.body!.isValid === true) {
              verified.push({ reference, body });
              if (init.at > promotedAt && !servedAt.has(i)) servedAt.set(i, v.at);
              const resultToken = v.body!.resultToken as string;
              const c = record(await post(i, '/api/v1/results/consume', { resultToken }));
              if (c.status === 200 && c.body!.valid === true && c.body!.alreadyConsumed === false) {
                const payload = JSON.parse(
                  Buffer.from(resultToken.split('.')[1]!, 'base64url').toString(),
                );
                consumed.push({ token: resultToken, jti: String(payload.jti) });
              }
            }
          }
          // an assertion with the next counter (an unanswered one may or may not have counted)
          counter++;
          const body = assertionBody(device, counter);
          const s = record(await post(i, '/api/v1/attestation/verify', body));
          if (s.status === 200 && s.body!.isValid === true) counters.set(device, { counter, body });
        }
      };
      const load = Array.from({ length: WORKERS }, (_, w) => worker(w));
      const until = async (what: () => boolean, ms: number) => {
        const end = performance.now() + ms;
        while (!what() && performance.now() < end) await new Promise((r) => setTimeout(r, 50));
      };

      await until(() => verified.length >= 10, 20_000);
      const beforeKill = answers.length;
      pair.killPrimary();
      const killedAt = performance.now();
      // no host takes writes: both say they are not ready (the killed primary's backends may
      // answer reads a moment longer, until they notice their postmaster is gone)
      const ready = await Promise.all(
        [a, b].map(async (i) => {
          for (const end = performance.now() + 3000; performance.now() < end;) {
            const status = (await fetch(`${i.server.url}/readyz`)).status;
            if (status === 503) return status;
            await new Promise((r) => setTimeout(r, 100));
          }
          return 200;
        }),
      );
      await new Promise((r) => setTimeout(r, Math.max(0, killedAt + 1000 - performance.now())));
      pair.promote();
      promotedAt = performance.now();
      await new Promise((r) => setTimeout(r, 2000));
      // the failover manager: no standby is left to confirm the new primary's commits. Until
      // now they waited; the server processes attest holds meanwhile are counted first (a pool
      // replaced while its commits wait leaves them behind, until none is left: 53300)
      const manager = postgres(pair.adminUrl(pair.standbyPort), { max: 1, onnotice: () => {} });
      const [held] = await manager<{ n: number }[]>`
        select count(*)::int as n from pg_stat_activity where usename = 'attest'`;
      await manager.unsafe(`alter system set synchronous_standby_names = ''`);
      await manager.unsafe('select pg_reload_conf()');
      await manager.end();
      await until(() => servedAt.size === 2, 15_000);
      const servedSeconds = [a, b].map((i) => ((servedAt.get(i) ?? Infinity) - promotedAt) / 1000);
      // a little more load on the new primary, then stop
      await new Promise((r) => setTimeout(r, 1000));
      stop = true;
      await Promise.all(load);

      const during = answers.slice(beforeKill);
      const statuses: Record<string, number> = {};
      for (const x of during) statuses[x.status] = (statuses[x.status] ?? 0) + 1;
      const slowest = Math.max(...during.map((x) => x.ms));
      console.log(
        JSON.stringify({
          figures: 'failover',
          killedToPromotedMs: Math.round(promotedAt - killedAt),
          servedAfterPromotionS: servedSeconds.map((s) => Number(s.toFixed(2))),
          statuses,
          slowestMs: Math.round(slowest),
          attestBackendsWhileCommitsWaited: held!.n,
          sessions: sessions.length,
          verified: verified.length,
          counters: [...counters.values()].map((c) => c.counter),
          consumed: consumed.length,
        }),
      );

      // every answer meanwhile: 200, or 503 with Retry-After (no verdict, retry); none hung
      const bad = during.filter((x) => !(x.status === 200 || (x.status === 503 && x.retryAfter)));
      expect(bad.map((x) => x.status)).toEqual([]);
      expect(ready).toEqual([503, 503]);
      // two instances' pools, change feeds and probes, and the test's own handle: nothing left behind
      expect(held!.n).toBeLessThanOrEqual(20);
      expect(slowest).toBeLessThan(5000);
      // both instances serve verifies again, without a restart
      expect(servedSeconds[0]).toBeLessThan(10);
      expect(servedSeconds[1]).toBeLessThan(10);

      // the ledger on the new primary: nothing acknowledged was lost
      const check = postgres(pair.adminUrl(pair.standbyPort, 'attest'), {
        max: 1,
        onnotice: () => {},
      });
      try {
        const stored = await check<{ reference: string; consumed: boolean }[]>`
          select reference, consumed_at is not null as consumed from attestation_sessions
          where reference = any(${sessions})`;
        const byRef = new Map(stored.map((s) => [s.reference, s.consumed]));
        // init's insert commits without waiting for its flush (sessions.ts): a session answered
        // just before the kill may be gone, and then fails closed. None answered after the
        // promotion is gone, and none that was verified (its verify's commit flushed it)
        const lost = sessions.filter((s) => !byRef.has(s));
        const verifiedRefs = new Set(verified.map((v) => v.reference));
        expect(lost.filter((s) => initAt.get(s)! > promotedAt || verifiedRefs.has(s))).toEqual([]);
        expect(
          verified.filter((v) => byRef.get(v.reference) !== true).map((v) => v.reference),
        ).toEqual([]);
        const jtis = await check<{ jti: string }[]>`
          select jti from consumed_results where jti = any(${consumed.map((c) => c.jti)})`;
        expect(jtis.length).toBe(consumed.length);
        const keys = await check<{ key_id: Buffer; counter: string }[]>`
          select key_id, counter::text from apple_keys where mode = 'test'`;
        const storedCounter = new Map(
          keys.map((k) => [k.key_id.toString('base64'), Number(k.counter)]),
        );
        for (const [device, acknowledged] of counters)
          expect(storedCounter.get(b64(device.keyId))).toBeGreaterThanOrEqual(acknowledged.counter);
      } finally {
        await check.end();
      }

      // and nothing is applied twice: each acknowledged verify, assertion and consume, sent
      // again to either instance, is refused
      for (const [n, v] of verified.entries()) {
        const again = await post(n % 2 ? a : b, '/api/v1/attestation/verify', v.body);
        expect(again.status).toBe(200);
        expect(again.body!.isValid).toBe(false);
      }
      for (const [n, c] of [...counters.values()].entries()) {
        const again = await post(n % 2 ? a : b, '/api/v1/attestation/verify', c.body);
        expect(again.body!.isValid).toBe(false);
      }
      for (const [n, c] of consumed.entries()) {
        const again = await post(n % 2 ? a : b, '/api/v1/results/consume', {
          resultToken: c.token,
        });
        expect(again.body).toMatchObject({ valid: true, alreadyConsumed: true });
      }
    }, 60_000);
  },
);
