// Tokens kept for replay (ATTEST_CAPTURE), through the HTTP API and the CLI, on the embedded
// database and PostgreSQL: a rejected verify is listed with its reason, `captures get` gives its
// bytes, `verify-file --capture ID` gives the same reason, or names what changed in the policy;
// `off` keeps nothing, `all` keeps accepted ones too, a failed capture write is a log line and
// not an error, and no RP API route reaches captures.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.js';
import type { CaptureMode } from '../../src/captureBound.js';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import type { Auditor } from '../../src/db/audit.js';
import { createCaptureRepository } from '../../src/db/captures.js';
import { OPENAPI_DOCUMENT } from '../../src/server/openapi.js';
import { createTokenCapturer } from '../../src/server/tokenCapture.js';
import {
  createAssertion,
  createAttestation,
  createDeviceKey,
  createTestCa,
  encodeAppleToken,
  TEST_APP_ID,
  TEST_NOW,
  type TestCa,
} from '../support/appleFactory.js';
import { runCli } from '../support/cli.js';
import { backends, useDatabase, type TestDatabase } from '../support/databases.js';
import { TEST_MASTER_KEY_ENV, TEST_SECRETS } from '../support/secrets.js';
import {
  captureLogger,
  createPlatformService,
  issueKey,
  verifySessionless,
} from '../support/service.js';

vi.setConfig({ testTimeout: 120_000 });

const auditor: Auditor = { actor: 'test', log: () => {} };
const MAX = { count: 1000, bytes: 64 * 1024 ** 2 };

let ca: TestCa;
let dir: string;
beforeAll(async () => {
  ca = await createTestCa();
  dir = mkdtempSync(join(tmpdir(), 'attest-capture-'));
  writeFileSync(join(dir, 'root.pem'), ca.rootPem);
});
afterAll(() => {
  delete process.env.DATABASE_URL;
  delete process.env.ATTEST_MASTER_KEY;
  delete process.env.ATTEST_DATA_DIR;
  delete process.env.ATTEST_APPLE_ROOT_CA;
  rmSync(dir, { recursive: true, force: true });
});

/** The CLI on `db` (its own connection, as an operator's would be). */
function onDatabase(db: TestDatabase) {
  process.env.DATABASE_URL = db.url;
  process.env.ATTEST_MASTER_KEY = TEST_MASTER_KEY_ENV;
  process.env.ATTEST_DATA_DIR = join(dir, 'data');
  // verify-file trusts the root the service trusts
  process.env.ATTEST_APPLE_ROOT_CA = join(dir, 'root.pem');
}

/** `attest ARGS`, with stdout as bytes (captures get writes raw CBOR). */
async function runRaw(...args: string[]): Promise<{ code: number; stdout: Buffer }> {
  const out: Buffer[] = [];
  const o = vi
    .spyOn(process.stdout, 'write')
    .mockImplementation((chunk: unknown) => (out.push(Buffer.from(chunk as Uint8Array)), true));
  const e = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
  try {
    return { code: await main(['node', 'attest', ...args]), stdout: Buffer.concat(out) };
  } finally {
    o.mockRestore();
    e.mockRestore();
    process.exitCode = undefined;
  }
}

describe.each(backends())('ATTEST_CAPTURE on $name', (backend) => {
  const db = useDatabase(backend);

  async function setUp(mode: CaptureMode) {
    onDatabase(db);
    const { logger, capture: logs } = captureLogger();
    const capturer = createTokenCapturer({
      mode,
      max: MAX,
      repo: createCaptureRepository(db.db),
      box: TEST_SECRETS,
      logger,
    });
    // a second per verify: captures list newest first
    let tick = 0;
    const service = createPlatformService(db, {
      now: () => new Date(TEST_NOW.getTime() + tick++ * 1000),
      appleRoots: ca.roots,
      capture: capturer,
    });
    const allowlist = createAllowlistRepository(db.db, null);
    // development keys only: a production key's registration is refused (its app is known then)
    await allowlist.addApple(TEST_APP_ID, 'development', auditor);
    const key = await issueKey(db, { name: 'rp' });
    const register = async () => {
      const device = await createDeviceKey();
      let token: Uint8Array = new Uint8Array();
      const res = await verifySessionless(service.app, key.key, async (nonce) => {
        token = encodeAppleToken({
          nonce,
          keyId: device.keyId,
          attestation: (await createAttestation(ca, device, { nonce })).attestation,
        });
        return token;
      });
      const body = (await res.json()) as { isValid: boolean };
      await capturer.idle();
      return { token, valid: body.isValid };
    };
    const reject = async () => {
      const { token, valid } = await register();
      expect(valid).toBe(false);
      return token;
    };
    const accept = async () => {
      await allowlist.addApple(TEST_APP_ID, 'production', auditor);
      expect((await register()).valid).toBe(true);
      await allowlist.addApple(TEST_APP_ID, 'development', auditor);
    };
    return { service, key, reject, accept, logs, capturer };
  }

  const list = async (...args: string[]) => {
    const run = await runCli('captures', 'list', '--json', ...args);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    return JSON.parse(run.stdout) as Array<Record<string, unknown>>;
  };

  it('rejected: the rejection is listed with its reason, get gives its bytes, verify-file --capture the same reason', async () => {
    const { key, reject, accept } = await setUp('rejected');
    const token = await reject();
    await accept();
    const rows = await list();
    expect(rows).toEqual([
      expect.objectContaining({
        verdict: 'rejected',
        valid: false,
        reason: 'apple_environment_not_allowed',
        app: TEST_APP_ID,
        service: 'apple',
        mode: 'live',
        apiKeyId: key.id,
        verifiedAt: TEST_NOW.toISOString(),
      }),
    ]);
    expect(rows[0]!.detail).toBeTypeOf('string');
    const id = rows[0]!.id as string;
    expect(
      await list('--reason', 'apple_environment_not_allowed', '--app', TEST_APP_ID),
    ).toHaveLength(1);
    expect(await list('--reason', 'nonce_mismatch')).toHaveLength(0);
    expect(await list('--mode', 'test')).toHaveLength(0);

    const got = await runRaw('captures', 'get', id);
    expect(got.code).toBe(0);
    expect(got.stdout.equals(Buffer.from(token))).toBe(true);

    const replay = await runCli('verify-file', '--capture', id, '--json');
    expect(replay.code).toBe(1);
    const doc = JSON.parse(replay.stdout) as Record<string, unknown>;
    expect(doc).toMatchObject({
      valid: false,
      reason: 'apple_environment_not_allowed',
      verifiedAt: TEST_NOW.toISOString(),
      nonceChecked: true,
      mode: 'live',
      capture: {
        id,
        same: true,
        policyChanges: [],
        server: { reason: 'apple_environment_not_allowed' },
      },
    });
    const text = await runCli('verify-file', '--capture', id);
    expect(text.stdout).toContain('this replay gives the same verdict and reason');

    // each token read is in the audit trail
    const audit = await runCli('audit', 'list', '--json');
    const events = (JSON.parse(audit.stdout) as Array<{ action: string; target: string }>).filter(
      (e) => e.action === 'capture.read',
    );
    expect(events.map((e) => e.target)).toEqual([
      `capture:${id}`,
      `capture:${id}`,
      `capture:${id}`,
    ]);

    // the policy changes: the replay says what changed
    await createAllowlistRepository(db.db, null).addApple(TEST_APP_ID, 'production', auditor);
    const after = await runCli('verify-file', '--capture', id, '--json');
    expect(JSON.parse(after.stdout)).toMatchObject({
      capture: {
        same: false,
        policyChanges: [`${TEST_APP_ID}'s env changed: "development" then, "production" now`],
      },
    });
    await createAllowlistRepository(db.db, null).removeApple(TEST_APP_ID, auditor);
    const removed = await runCli('verify-file', '--capture', id);
    expect(removed.stdout).toContain(
      `policy changed: the allowlist entry of ${TEST_APP_ID} was removed since`,
    );
    expect(removed.stdout).toContain('not what the server answered');
  });

  it('all keeps accepted verifies too; off keeps nothing', async () => {
    const all = await setUp('all');
    await all.reject();
    await all.accept();
    expect((await list()).map((r) => r.verdict)).toEqual(['accepted', 'rejected']);
    expect(await list('--reason', 'none')).toHaveLength(1);
    await db.reset();
    const off = await setUp('off');
    await off.reject();
    await off.accept();
    expect(await list()).toEqual([]);
  });

  it('a failed capture write is a log line, not an error to the RP', async () => {
    onDatabase(db);
    const { logger, capture: logs } = captureLogger();
    let failed!: () => void;
    const written = new Promise<void>((resolve) => (failed = resolve));
    const capturer = createTokenCapturer({
      mode: 'rejected',
      max: MAX,
      repo: {
        record: () => {
          queueMicrotask(failed);
          return Promise.reject(new Error('disk full'));
        },
      },
      box: TEST_SECRETS,
      logger,
    });
    const service = createPlatformService(db, {
      now: TEST_NOW,
      appleRoots: ca.roots,
      capture: capturer,
    });
    const key = await issueKey(db, { name: 'rp' });
    const device = await createDeviceKey();
    const res = await verifySessionless(service.app, key.key, (nonce) =>
      encodeAppleToken({
        nonce,
        keyId: device.keyId,
        assertion: createAssertion(device, { nonce, counter: 1 }).assertion,
      }),
    );
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ isValid: false });
    await written;
    await capturer.idle();
    expect(logs.lines.some((l) => l.msg === 'could not keep a token capture')).toBe(true);
  });

  it('the RP API has no route to captures', async () => {
    const { service, key, reject } = await setUp('rejected');
    await reject();
    const [row] = await list();
    for (const path of [
      '/api/v1/captures',
      `/api/v1/captures/${row!.id as string}`,
      '/captures',
      '/api/v1/admin/captures',
    ]) {
      const res = await service.app.request(`http://attest.test${path}`, {
        headers: { 'X-Api-Key': key.key },
      });
      expect(res.status, path).toBe(404);
    }
    expect(Object.keys(OPENAPI_DOCUMENT.paths).filter((p) => /captur/i.test(p))).toEqual([]);
  });
});

describe('captures and verify-file --capture: bad input exits 2 with one line', () => {
  it.each([
    [['captures', 'get', 'nope']],
    [['captures', 'list', '--reason', 'not_a_reason']],
    [['captures', 'list', '--mode', 'staging']],
    [['captures', 'list', '--limit', '0']],
    [['captures', 'list', '--since', 'yesterday']],
    [['verify-file', '--capture', 'xyz']],
    [['verify-file', '--capture', '0123456789abcdef', 'token.cbor']],
    [['verify-file', '--capture', '0123456789abcdef', '--nonce', 'AAAA']],
    [['verify-file', '--capture', '0123456789abcdef', '--dev-roots']],
  ])('attest %j', async (args) => {
    const run = await runCli(...args);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
    expect(run.stderr).toMatch(/^attest: /);
  });
});
