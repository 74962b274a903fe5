import { Command } from 'commander';
import { DEFAULT_RESULT_TOKEN_TTL_SECONDS } from '../../config.js';
import { RETIRED_KEY_GRACE_SECONDS, ROTATION_DELAY_SECONDS } from '../../core/resultKeyTiming.js';
import type { ResultKeyRecord } from '../../db/resultKeys.js';
import { auditorFor, config, withAdmin } from '../context.js';
import { printJson, printTable, when } from '../output.js';

/** A key's state at the read: pending (published, not signing yet), current (signs), retired. */
export type ResultKeyState = 'pending' | 'current' | 'retired';

/** A signing key as `result-keys list` shows it: ids, states and dates, never key bytes. */
export interface ResultKeyView {
  kid: string;
  /** live, or test (signs test-mode keys' tokens; published at /.well-known/jwks-test.json) */
  mode: 'live' | 'test';
  state: ResultKeyState;
  /** in its JWKS (/.well-known/jwks.json, or jwks-test.json for a test key) */
  published: boolean;
  createdAt: string;
  signingFrom: string;
  retiredAt: string | null;
  /** a retired key leaves the JWKS then (retirement + ATTEST_RESULT_TOKEN_TTL + 1 h) */
  publishedUntil: string | null;
}

/** The view of each key, read relative to the database's clock. */
export function viewOf(record: Omit<ResultKeyRecord, 'sealed'>, ttlSeconds: number): ResultKeyView {
  const publishMs = (ttlSeconds + RETIRED_KEY_GRACE_SECONDS) * 1000;
  const retired = record.retiredMsAgo !== null && record.retiredMsAgo >= 0;
  return {
    kid: record.id,
    mode: record.mode,
    state: record.signingInMs > 0 ? 'pending' : retired ? 'retired' : 'current',
    published: record.retiredMsAgo === null || record.retiredMsAgo < publishMs,
    createdAt: record.createdAt.toISOString(),
    signingFrom: record.signingFrom.toISOString(),
    retiredAt: record.retiredAt?.toISOString() ?? null,
    publishedUntil: record.retiredAt
      ? new Date(record.retiredAt.getTime() + publishMs).toISOString()
      : null,
  };
}

export function resultKeysCommand(): Command {
  const keys = new Command('result-keys')
    .description(
      'the keys that sign result tokens (published at /.well-known/jwks.json; test-mode keys at /.well-known/jwks-test.json)',
    )
    .addHelpText(
      'after',
      '\nExamples:\n  $ attest result-keys list\n  $ attest result-keys rotate',
    );

  keys
    .command('rotate')
    .description(
      `make a new signing key: published at once, it signs from ${ROTATION_DELAY_SECONDS} s later, when every instance has it; the previous key stays published until its last token expires (+1 h)`,
    )
    .option('--test', "rotate the test keys (test-mode API keys' tokens) instead of the live ones")
    .option('--json', 'print the new key (kid, dates) as JSON')
    .addHelpText('after', '\nExample:\n  $ attest result-keys rotate --json')
    .action(async (opts: { json?: boolean; test?: boolean }, command: Command) => {
      const auditor = auditorFor(command);
      const ttl = config().resultTokenTtlSeconds ?? DEFAULT_RESULT_TOKEN_TTL_SECONDS;
      await withAdmin(
        async (admin) => {
          const record = await admin.run('resultKeys.rotate', opts.test ? { mode: 'test' } : {});
          const view = viewOf(record, ttl);
          if (opts.json) printJson(view);
          else
            process.stdout.write(
              `new ${view.mode === 'test' ? 'test ' : ''}result signing key ${view.kid}: published now, signs from ${when(record.signingFrom)}\n`,
            );
        },
        { auditor },
      );
    });

  keys
    .command('list')
    .description('list signing keys: ids, states and dates (never key bytes)')
    .option('--json', 'print the list as JSON')
    .addHelpText('after', '\nExample:\n  $ attest result-keys list --json')
    .action(async (opts: { json?: boolean }) => {
      const ttl = config().resultTokenTtlSeconds ?? DEFAULT_RESULT_TOKEN_TTL_SECONDS;
      await withAdmin(async (admin) => {
        const views = (await admin.run('resultKeys.list', {})).map((r) => viewOf(r, ttl));
        if (opts.json) {
          printJson(views);
          return;
        }
        if (views.length === 0) {
          process.stdout.write(
            'no result signing keys yet: "attest serve" with ATTEST_ISSUER makes the first one\n',
          );
          return;
        }
        const date = (iso: string | null) => when(iso === null ? null : new Date(iso));
        printTable(
          [
            'KID',
            'MODE',
            'STATE',
            'PUBLISHED',
            'CREATED',
            'SIGNS FROM',
            'RETIRED',
            'PUBLISHED UNTIL',
          ],
          views.map((v) => [
            v.kid,
            v.mode,
            v.state,
            v.published ? 'yes' : 'no',
            date(v.createdAt),
            date(v.signingFrom),
            date(v.retiredAt),
            date(v.publishedUntil),
          ]),
        );
      });
    });

  return keys;
}
