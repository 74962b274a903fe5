import { basename, join, relative, resolve } from 'node:path';
import { Command, InvalidArgumentError, Option } from 'commander';
import {
  apiKeyCheck,
  generateApiKey,
  hashApiKey,
  parseApiKey,
  verifyApiKeyHash,
} from '../../core/apiKeys.js';
import type { Config } from '../../config.js';
import { readInputFileSync } from '../../inputFile.js';
import { writePrivateFile } from '../../writePrivateFile.js';
import { createApiKeyRepository } from '../../db/apiKeys.js';
import type { Auditor } from '../../db/audit.js';
import type { DatabaseHandle } from '../../db/database.js';
import { resolveMasterKey } from '../../db/masterKey.js';
import { createSecretBox } from '../../db/secretBox.js';
import type { RunningServer } from '../../server/start.js';
import { localAdmin } from '../admin.js';
import { auditorFor, config } from '../context.js';
import { runtimeError, usageError } from '../errors.js';
import { startProblem } from '../startProblem.js';
import { printJson } from '../output.js';
import { stopOnSignal } from './serve.js';
import { APPLE_APP_ID } from '../kinds/apple/appleAppId.js';
import { TEST_JWKS_PATH } from '../../core/resultToken.js';

/** The development data dir `attest dev up` uses unless told otherwise. */
export const DEV_DATA_DIR = './.attest-dev';
/** The test key `dev up` made, kept beside the master key so a second run reuses it. */
const DEV_KEY_FILE = 'dev-api-key';
const EXAMPLE_APP_ID = 'ABCDE12345.com.example.app';

/** What `attest dev up` prints (`--json` exactly this shape). */
export interface DevUpInfo {
  url: string;
  key: string;
  keyId: string;
  dataDir: string;
  appId: string;
  /** the `iss` of its result tokens (its own URL, unless --host is not loopback) */
  issuer: string;
  /** where its result tokens' keys are: its key is a test key, so the test JWKS */
  jwksUrl: string;
  /** what this run made (false: it was there already) */
  created: { key: boolean; devCa: boolean; app: boolean };
  /** the next commands, for a second shell */
  next: string[];
}

export function devUpCommand(): Command {
  return new Command('up')
    .description(
      'start the service on a development data dir with a test API key, the development CA and an example app; serves until Ctrl-C',
    )
    .option('--data-dir <dir>', `the development data dir (default ${DEV_DATA_DIR})`)
    .addOption(
      new Option('--port <n>', 'listen port (env PORT, default 8080; 0: any free port)').argParser(
        portFlag,
      ),
    )
    .option('--host <h>', 'listen address (default 127.0.0.1)')
    .option('--app-id <id>', 'an App Attest app ID to allowlist', EXAMPLE_APP_ID)
    .option(
      '--json',
      'print {"url","key","keyId","dataDir","appId","issuer","jwksUrl","created","next"}',
    )
    .addHelpText(
      'after',
      `
Its data dir is --data-dir (default ./.attest-dev), never ATTEST_DATA_DIR: that names the
operator's database, which dev up must not touch. The ATTEST_DATA_DIR= it prints is for the
other commands (keys, allowlist, stats...) to reach this one.
Prints URL=, KEY= and ATTEST_DATA_DIR= (one per line, so a shell can source them) and the next
commands; the service log goes to <data-dir>/attest.log (or ATTEST_LOG_FILE). A data dir that
holds live API keys is refused: dev up is for development data only. Its key has result tokens
on: test-mode tokens (test: true) whose iss is its own URL (http, allowed on loopback only), with
their keys at <url>/.well-known/jwks-test.json.

Examples:
  $ attest dev up
  $ attest dev up --data-dir /tmp/attest-dev --port 0 --json`,
    )
    .action(
      async (
        opts: { dataDir?: string; port?: number; host?: string; appId: string; json?: boolean },
        command: Command,
      ) => {
        if (!APPLE_APP_ID.test(opts.appId))
          throw usageError(`--app-id "${opts.appId}" is not TEAMID.bundle.id`);
        const base = config();
        if (base.databaseUrl)
          throw usageError(
            'attest dev up runs on an embedded development database, and DATABASE_URL is set: unset it for this command',
          );
        const dataDir = resolve(opts.dataDir ?? DEV_DATA_DIR);
        const cfg: Config = {
          ...base,
          dataDir,
          port: opts.port ?? base.port,
          host: opts.host ?? '127.0.0.1',
          logFile: base.logFile ?? join(dataDir, 'attest.log'),
          testKeys: true,
        };
        const auditor = auditorFor(command);
        // result tokens name dev up's own URL as issuer: http, so on loopback only (a wildcard
        // address is reached through loopback); elsewhere ATTEST_ISSUER must give an https one
        let ownUrl: string | undefined;
        const ownIssuer = servesLoopback(cfg.host) ? () => ownUrl! : undefined;
        if (!ownIssuer && !cfg.issuer)
          throw usageError(
            `--host ${cfg.host} is not a loopback address: result tokens need ATTEST_ISSUER (an https URL) there, since an http issuer is allowed on loopback only`,
          );
        const [{ createLogger }, { startServer }] = await Promise.all([
          import('../../server/logger.js'),
          import('../../server/start.js'),
        ]);
        // stdout is what an RP developer copies (URL=, KEY=): the service log goes to its file
        const logger = createLogger({ level: cfg.logLevel, file: cfg.logFile, stdout: false });
        let server: RunningServer;
        try {
          server = await startServer(cfg, logger, {
            migrate: true,
            ...(ownIssuer ? { ownIssuer } : {}),
            onProgress: (message) => process.stderr.write(`${message}\n`),
          });
        } catch (err) {
          logger.flush();
          throw startProblem(err, cfg);
        }
        if (server.masterKey.created)
          process.stderr.write(
            `attest: created a master key in ${server.masterKey.source}: back it up with the data dir (not inside the same backup)\n`,
          );
        ownUrl = reachableUrl(server.url);
        let info: DevUpInfo;
        try {
          info = await prepare(server, cfg, opts.appId, auditor);
          await waitReady(server.url);
        } catch (err) {
          await server.close().catch(() => {});
          throw err;
        }
        const stopped = stopOnSignal(server, logger);
        if (opts.json) printJson(info);
        else process.stdout.write(describe(info));
        await stopped;
      },
    );
}

/** Makes what an RP developer needs on the server's own database handle (this process owns it). */
async function prepare(
  server: RunningServer,
  cfg: Config,
  appId: string,
  auditor: Auditor,
): Promise<DevUpInfo> {
  const handle = server.database;
  const box = createSecretBox([(await resolveMasterKey(cfg, handle)).key]);
  // the same operations as keys create, dev init and allowlist add, on this process's own handle
  const admin = localAdmin(handle, async () => box, auditor);
  const live = (await admin.run('keys.list', {})).filter((r) => r.mode === 'live' && !r.revokedAt);
  if (live.length > 0)
    throw usageError(
      `the data dir ${cfg.dataDir} holds live API keys (${live.map((r) => r.id).join(', ')}): attest dev up runs only on development data; give another --data-dir`,
    );
  const { stored } = await admin.run('dev.init', { rotate: false });
  const app = (await admin.run('allowlist.list', {})).apple.some((a) => a.appId === appId)
    ? false
    : (await admin.run('allowlist.addApple', { appId })).result === 'added';
  const kept = await keptKey(handle, cfg.dataDir);
  let key = kept;
  let created = false;
  // a key kept from a run before result tokens came to dev up gets them now
  if (kept && !(await createApiKeyRepository(handle.db).find(parseApiKey(kept)!.id))?.resultTokens)
    await admin.run('keys.setResultTokens', { id: parseApiKey(kept)!.id, on: true });
  if (!key) {
    const made = generateApiKey(cfg.apiKeyPrefix);
    await admin.run('keys.create', {
      id: made.id,
      name: 'attest dev up',
      hash: await hashApiKey(made.key),
      precheck: apiKeyCheck(made.key),
      expiresInSeconds: null,
      mode: 'test',
      resultTokens: true,
    });
    key = made.key;
    created = true;
    const file = join(cfg.dataDir, DEV_KEY_FILE);
    writePrivateFile(file, `${key}\n`);
  }
  server.reloadNow();
  const url = reachableUrl(server.url);
  const issuer = servesLoopback(cfg.host) ? url : cfg.issuer!;
  const cli = invokedAs();
  return {
    url,
    key,
    keyId: parseApiKey(key)!.id,
    issuer,
    jwksUrl: `${issuer}${TEST_JWKS_PATH}`,
    dataDir: cfg.dataDir,
    appId,
    created: { key: created, devCa: stored, app },
    next: [
      `export URL=${url} KEY=${key} ATTEST_DATA_DIR=${shellWord(cfg.dataDir)}`,
      `NONCE=$(node -p 'require("crypto").randomBytes(32).toString("base64")'); TOKEN=$(${cli} dev mint apple --app-id ${appId} --device dev-iphone.json --nonce "$NONCE")`,
      `curl -s "$URL/api/v1/attestation/verify" -H "X-Api-Key: $KEY" -H 'Content-Type: application/json' -d "{\\"attestationToken\\":\\"$TOKEN\\",\\"expectedNonce\\":\\"$NONCE\\"}"`,
    ],
  };
}

/** The key a previous `dev up` kept in the data dir, while it is still an active test key there. */
async function keptKey(handle: DatabaseHandle, dataDir: string): Promise<string | null> {
  let text: string;
  try {
    // its own small file; bounded all the same (the data dir is the operator's)
    text = readInputFileSync(join(dataDir, DEV_KEY_FILE), { maxBytes: 1024, what: DEV_KEY_FILE })
      .toString('utf8')
      .trim();
  } catch {
    return null;
  }
  const parsed = parseApiKey(text);
  if (!parsed) return null;
  const row = await createApiKeyRepository(handle.db).find(parsed.id);
  if (!row || row.mode !== 'test' || row.revokedAt) return null;
  if (row.expiresAt && row.expiresAt.getTime() <= Date.now()) return null;
  return (await verifyApiKeyHash(row.hash, text)) ? text : null;
}

/** The same readiness probe a supervisor uses, once, before anything is printed. */
async function waitReady(url: string): Promise<void> {
  const res = await fetch(`${reachableUrl(url)}/readyz`);
  if (!res.ok) throw runtimeError(`the service started but /readyz answers ${res.status}`);
  await res.arrayBuffer();
}

function describe(info: DevUpInfo): string {
  return [
    `URL=${info.url}`,
    `KEY=${info.key}`,
    `ATTEST_DATA_DIR=${shellWord(info.dataDir)}`,
    `# attest dev up (pid ${process.pid}) serves until Ctrl-C; log: ${join(info.dataDir, 'attest.log')}`,
    `# test key ${info.keyId}${info.created.key ? ' (new)' : ''}, development CA${info.created.devCa ? ' (new)' : ''}, ${info.appId} allowlisted`,
    `# result tokens: iss ${info.issuer}, test: true, keys at ${info.jwksUrl}`,
    '# next, in another shell:',
    ...info.next.map((c) => `#   ${c}`),
    '',
  ].join('\n');
}

/** Whether the service is reached through loopback when it listens on `host`. */
function servesLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '');
  return h === '0.0.0.0' || h === '::' || h === '::1' || h === 'localhost' || /^127\./.test(h);
}

/** A wildcard listen address is reached through loopback. */
function reachableUrl(url: string): string {
  return url.replace('//0.0.0.0:', '//127.0.0.1:').replace('//[::]:', '//[::1]:');
}

/** How to run this CLI again from the current folder: `attest` when installed, else node and its path. */
function invokedAs(): string {
  const script = process.argv[1] ?? 'attest';
  if (basename(script) === 'attest') return 'attest';
  const rel = relative(process.cwd(), script);
  return `node ${shellWord(rel.startsWith('..') ? script : rel)}`;
}

function shellWord(text: string): string {
  return /^[\w./:@%+=-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`;
}

function portFlag(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535)
    throw new InvalidArgumentError('a port is 0 to 65535');
  return n;
}
