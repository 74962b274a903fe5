/**
 * Two attest instances on one PostgreSQL database, as a deployment behind a load balancer runs
 * them, and App Attest tokens minted under the development CA for a test API key: what the
 * change-notification test and bench/notify.ts share.
 */
import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { loadConfig, type Config } from '../../src/config.js';
import { createDevCa, createSimulatedKey, mintAttestation } from '../../src/core/dev/devCa.js';
import { encodeAppleToken } from '../../src/core/apple/appleToken.js';
import { createDevCaRepository } from '../../src/db/devCa.js';
import { startServer, type RunningServer } from '../../src/server/start.js';
import { TEST_MASTER_KEY_ENV, TEST_SECRETS } from './secrets.js';
import { captureLogger, issueKey } from './service.js';

export interface Instance {
  server: RunningServer;
  /** emits `change` (table name) after each reload a notification caused */
  changes: EventEmitter;
}

/**
 * Starts an instance on `url`; `propagationMs` is the fallback re-read interval, `overrides` what
 * differs from the defaults (ATTEST_CHANGE_FEED is `auto` unless given).
 */
export async function startInstance(
  url: string,
  propagationMs?: number,
  overrides: Partial<Config> = {},
): Promise<Instance> {
  const config: Config = {
    ...loadConfig({}, {}),
    databaseUrl: url,
    port: 0,
    host: '127.0.0.1',
    masterKey: TEST_MASTER_KEY_ENV,
    logLevel: 'warn',
    ...overrides,
  };
  const changes = new EventEmitter();
  const server = await startServer(config, captureLogger('warn').logger, {
    migrate: true,
    ...(propagationMs !== undefined ? { propagationMs } : {}),
    onChange: (table) => changes.emit('change', table),
  });
  return { server, changes };
}

/** Resolves with the next notification of `table` on `instance`. */
export function nextChange(instance: Instance, table: string): Promise<void> {
  return new Promise((resolve) => {
    const on = (t: string) => {
      if (t !== table) return;
      instance.changes.off('change', on);
      resolve();
    };
    instance.changes.on('change', on);
  });
}

/** A test API key and the development CA in the instance's database; mints registrations for any app ID. */
export async function testMinter(instance: Instance) {
  const db = instance.server.database;
  const { key } = await issueKey(db, { name: 'notify', mode: 'test' });
  const { ca } = await createDevCaRepository(db.db, TEST_SECRETS).put(
    await createDevCa(new Date()),
    { replace: false },
  );
  return {
    key,
    /** a sessionless verify body: a fresh simulated device's registration for `appId` */
    async registration(appId: string): Promise<string> {
      const nonce = createHash('sha256').update(appId).update(String(Math.random())).digest();
      const device = createSimulatedKey();
      const attestation = await mintAttestation(ca, device, {
        appId,
        environment: 'Production',
        clientDataHash: createHash('sha256').update(nonce).digest(),
        now: new Date(),
      });
      const token = encodeAppleToken({ nonce, keyId: device.keyId, attestation });
      return JSON.stringify({
        attestationToken: Buffer.from(token).toString('base64'),
        expectedNonce: nonce.toString('base64'),
      });
    },
  };
}

/** POST /verify on an instance; resolves with isValid. */
export async function verifyOn(instance: Instance, key: string, body: string): Promise<boolean> {
  const res = await fetch(`${instance.server.url}/api/v1/attestation/verify`, {
    method: 'POST',
    headers: { 'X-Api-Key': key, 'Content-Type': 'application/json' },
    body,
  });
  if (res.status !== 200) throw new Error(`verify answered ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { isValid: boolean }).isValid;
}
