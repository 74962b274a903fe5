import { Command } from 'commander';
import { acceptedServiceNames, serviceNamed, type Service } from '../../core/services.js';
import {
  STATS_DIMENSIONS,
  STATS_MODES,
  type RolloutRule,
  type StatsDimension,
  type StatsMode,
  type StatsTotal,
} from '../../db/statsDimensions.js';
import { durationProblem, parseDuration } from '../../core/duration.js';
import { withAdmin } from '../context.js';
import { usageError } from '../errors.js';
import { isoInstant } from '../isoInstant.js';
import { printJson } from '../output.js';
import { modeText, rolloutText, statsText } from '../stats/statsSummary.js';
import { issuerJson, issuerText } from '../stats/issuerText.js';

const KEY_ID = /^[0-9a-z]{16}$/;

interface StatsFlags {
  since: string;
  app?: string;
  key?: string;
  service?: string;
  by: string;
  mode: string;
  json?: boolean;
  watch?: boolean;
}

/** The validated query of a run. */
export interface StatsRequest {
  since: Date;
  until: Date;
  by: StatsDimension;
  /** whose verifies are counted: live keys unless asked */
  mode: StatsMode;
  app?: string;
  apiKeyId?: string;
  service?: Service;
}

/** Checks a `--mode` flag (a usage error names the accepted values). */
export function statsMode(text: string): StatsMode {
  if (!(STATS_MODES as readonly string[]).includes(text))
    throw usageError(`--mode takes one of ${STATS_MODES.join(', ')}, got "${text}"`);
  return text as StatsMode;
}

/** Checks the flags (usage errors, exit 2) and fixes the window, ending now. */
export function statsRequest(flags: StatsFlags, now: Date = new Date()): StatsRequest {
  let since: Date;
  const seconds = parseDuration(flags.since);
  if (seconds !== null) since = new Date(now.getTime() - seconds * 1000);
  else if (/^\d{4}-/.test(flags.since))
    since = isoInstant(flags.since, '--since', '2026-11-27T09:00:00Z');
  else if (/^\s*\d+\s*$/.test(flags.since))
    throw usageError(durationProblem('--since', flags.since));
  else
    throw usageError(
      `--since takes a duration back from now (30m, 24h, 7d) or an ISO 8601 time, got "${flags.since}"`,
    );
  if (since.getTime() > now.getTime()) throw usageError('--since is in the future');
  if (!(STATS_DIMENSIONS as readonly string[]).includes(flags.by))
    throw usageError(`--by takes one of ${STATS_DIMENSIONS.join(', ')}, got "${flags.by}"`);
  if (flags.watch && flags.json) throw usageError('--watch is a live view: it has no --json');
  if (flags.watch && flags.by !== 'app')
    throw usageError('--watch shows counts per app: it takes no --by');
  const request: StatsRequest = {
    since,
    until: now,
    by: flags.by as StatsDimension,
    mode: statsMode(flags.mode),
  };
  if (flags.app !== undefined) {
    if (!/^[\x21-\x7e]{1,255}$/.test(flags.app))
      throw usageError(
        `--app takes an App Attest app ID or an Android package, got "${flags.app}"`,
      );
    request.app = flags.app;
  }
  if (flags.key !== undefined) {
    if (!KEY_ID.test(flags.key))
      throw usageError(
        `--key takes an API key id (16 lowercase letters or digits), got "${flags.key}"`,
      );
    request.apiKeyId = flags.key;
  }
  if (flags.service !== undefined) {
    const service = serviceNamed(flags.service);
    if (!service)
      throw usageError(`--service takes ${acceptedServiceNames()}, got "${flags.service}"`);
    request.service = service;
  }
  return request;
}

/**
 * `--json`: one row per value of the `by` dimension, key mode, outcome and reason, named by the
 * dimension; and `rules`, the observed rules' rollout counts (each from the time it was
 * observed), each with the mode it counted.
 */
export function statsJson(
  request: StatsRequest,
  totals: readonly StatsTotal[],
  rules: readonly RolloutRule[] = [],
) {
  return {
    since: request.since.toISOString(),
    until: request.until.toISOString(),
    mode: request.mode,
    rows: totals.map((t) => ({
      [request.by]: t.value,
      mode: t.mode,
      outcome: t.outcome,
      reason: t.reason,
      count: t.count,
    })),
    rules: rules.map((r) => ({
      app: r.app,
      mode: r.mode,
      reason: r.reason,
      observedSince: r.observedSince?.toISOString() ?? null,
      verifies: r.verifies,
      valid: r.valid,
      wouldReject: r.wouldReject,
      share: r.share,
      devices: r.devices,
      wouldRejectDevices: r.wouldRejectDevices,
    })),
  };
}

/** What the live view's header says it counts: the mode, then the filters given. */
export function watchFilters(request: StatsRequest): string {
  return [
    modeText(request.mode),
    request.app && `app ${request.app}`,
    request.apiKeyId && `key ${request.apiKeyId}`,
    request.service && `service ${request.service}`,
  ]
    .filter(Boolean)
    .join(', ');
}

export function statsCommand(): Command {
  return new Command('stats')
    .description(
      'verification counts of every instance: valid, rejected, observed and errors, per app (or key, service, reason, minute)',
    )
    .option(
      '--since <when>',
      'the window: a duration back from now (1h, 24h, 7d) or an ISO time',
      '24h',
    )
    .option('--app <id>', 'only this App Attest app ID or Android package')
    .option('--key <id>', 'only this API key id')
    .option('--service <service>', 'only apple, gms or android-key')
    .option('--by <dimension>', `sum by ${STATS_DIMENSIONS.join(', ')}`, 'app')
    .option(
      '--mode <mode>',
      `whose verifies: live keys, test keys (a rehearsal) or all (${STATS_MODES.join(', ')})`,
      'live',
    )
    .option(
      '--json',
      'print {"since", "until", "mode", "rows": [...], "rules": [...], "issuers": [...]} as JSON',
    )
    .option(
      '--watch',
      `live view of the last 5 minutes' counts per app, refreshed every 2 s (q quits)`,
    )
    .addHelpText(
      'after',
      `
Counts reach the database every 10 s from each instance: the last seconds may be missing.
Every figure counts live keys unless --mode says otherwise: a test key's verifies (a rehearsal
with minted tokens) never move a live share; --mode test shows the rehearsal's own.
Under the table, each observed rule (allowlist add --observe) with the verifies since it was
observed (the time from the audit trail, whatever --since says), how many it would have
rejected, and that share of the valid ones: what --enforce would turn away.

Examples:
  $ attest stats                              per app over the last 24 hours
  $ attest stats --since 1h --by reason       what was rejected (or observed) in the last hour
  $ attest stats --mode test                  a rehearsal with test keys, apart from live traffic
  $ attest stats --app ABCDE12345.com.example.bank --by minute --json
  $ attest stats --watch                      live counts; q quits`,
    )
    .action(async (flags: StatsFlags) => {
      const request = statsRequest(flags);
      if (flags.watch) {
        const { runStatsWatch } = await import('../stats/runStatsWatch.js');
        const { WATCH_WINDOW_MINUTES } = await import('../stats/StatsWatch.js');
        const filters = watchFilters(request);
        await withAdmin((admin) =>
          runStatsWatch(() => {
            const until = new Date();
            return admin.run('stats.totals', {
              ...request,
              by: 'app',
              since: new Date(until.getTime() - WATCH_WINDOW_MINUTES * 60_000),
              until,
            });
          }, filters),
        );
        return;
      }
      const { totals, rules, issuers } = await withAdmin(async (admin) => ({
        totals: await admin.run('stats.totals', request),
        rules: await admin.run('stats.rollout', {
          until: request.until,
          mode: request.mode,
          ...(request.app !== undefined ? { app: request.app } : {}),
          ...(request.apiKeyId !== undefined ? { apiKeyId: request.apiKeyId } : {}),
          ...(request.service !== undefined ? { service: request.service } : {}),
        }),
        issuers: await admin.run('stats.issuers', {
          at: request.until,
          limit: 5,
          mode: request.mode,
        }),
      }));
      if (flags.json)
        printJson({ ...statsJson(request, totals, rules), issuers: issuerJson(issuers) });
      else
        process.stdout.write(
          statsText(totals, request.by, request) +
            rolloutText(rules) +
            issuerText(issuers, request.mode),
        );
    });
}
