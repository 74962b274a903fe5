import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { startAdminServer, type AdminServer } from '../admin/adminServer.js';
import { OPERATIONS, runOperation } from '../admin/operations.js';
import type { Config } from '../config.js';
import type { DatabaseHandle } from '../db/database.js';
import type { SecretBox } from '../db/secretBox.js';
import { backupCluster } from '../db/embeddedBackup.js';
import { createPrivateSocketPath, removeSocket } from '../socketPath.js';
import { describeFault } from './app.js';

/**
 * The admin API on a 0600 unix socket in a new 0700 folder, announced with a per-run secret in
 * the 0600 lock file. Each request runs one of the CLI's operations on this process's handle.
 */
export async function startAdmin(
  database: DatabaseHandle,
  config: Config,
  logger: Logger,
  box: SecretBox,
  reload: () => Promise<void>,
): Promise<AdminServer> {
  const socketPath = createPrivateSocketPath(config.socketDir);
  const secret = randomBytes(32).toString('base64url');
  let server: AdminServer;
  try {
    server = await startAdminServer(socketPath, {
      secret,
      async execute(name, input, actor, audit) {
        const result = await runOperation(name, input, {
          handle: database,
          // checked against the database when the server started
          secrets: async () => box,
          ...(actor !== undefined ? { auditor: { actor, log: audit } } : {}),
          // status --check reaches the upstreams this server uses
          upstreams: {
            googleOauthUrl: config.googleOauthUrl,
            googlePlayIntegrityUrl: config.googlePlayIntegrityUrl,
            appleReceiptUrlDevelopment: config.appleReceiptUrlDevelopment,
            appleReceiptUrlProduction: config.appleReceiptUrlProduction,
          },
        });
        if (OPERATIONS[name].changes) await reload();
        return result;
      },
      backup: () => backupCluster(database.url!, database.dataDir!),
      onFault: (err, op) =>
        logger.error({ err: describeFault(err), op }, 'an admin operation failed'),
    });
    database.announce!({ socket: socketPath, secret });
  } catch (err) {
    removeSocket(socketPath);
    throw err;
  }
  return {
    async stop() {
      await server.stop();
      removeSocket(socketPath);
    },
  };
}
