/**
 * deploy/prometheus and deploy/grafana: the alert rules pass promtool's check and their own unit
 * tests (each alert fires on the series that should fire it), and every metric the rules and the
 * dashboard read is one that attest exports, so a renamed metric cannot silently blank a panel.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createMetrics } from '../../src/server/metrics.js';
import { ROOT } from '../support/binary.js';

const RULES = join(ROOT, 'deploy', 'prometheus', 'attest-alerts.yml');
const RULE_TESTS = join(ROOT, 'deploy', 'prometheus', 'attest-alerts.test.yml');
const DASHBOARD = join(ROOT, 'deploy', 'grafana', 'attest-dashboard.json');

// .ci/run installs Debian's prometheus package; a machine without promtool skips these two
const promtool = spawnSync('promtool', ['--version']).status === 0;

/** every attest_* name that an expression reads, histogram suffixes folded into the metric */
function metricNames(text: string): Set<string> {
  return new Set(
    [...text.matchAll(/\battest_[a-z0-9_]+/g)].map((m) => m[0].replace(/_(bucket|sum|count)$/, '')),
  );
}

/** the names a fully configured instance exports */
async function exported(): Promise<Set<string>> {
  const metrics = createMetrics({
    sessionCounts: async () => ({ active: 0, consumed: 0, expired: 0 }),
    androidRevocationTakenAt: () => new Date(),
    databaseBreakerOpen: () => false,
  });
  return new Set((await metrics.registry.getMetricsAsJSON()).map((m) => m.name));
}

describe('monitoring: alert rules and the Grafana dashboard', () => {
  it.skipIf(!promtool)('promtool checks the rules', () => {
    const run = spawnSync('promtool', ['check', 'rules', RULES], { encoding: 'utf8' });
    expect(run.stdout + run.stderr).toContain('SUCCESS: 10 rules found');
    expect(run.status).toBe(0);
  });

  it.skipIf(!promtool)(
    'every alert fires in its unit test, and only where it should; the rollout share records its ratio',
    () => {
      const run = spawnSync('promtool', ['test', 'rules', RULE_TESTS], { encoding: 'utf8' });
      expect(run.stdout + run.stderr).toContain('SUCCESS');
      expect(run.status).toBe(0);
      // each alert of the rules has a test of its own
      const alerts = [...readFileSync(RULES, 'utf8').matchAll(/- alert: (\w+)/g)].map((m) => m[1]);
      const tested = new Set(
        [...readFileSync(RULE_TESTS, 'utf8').matchAll(/alertname: (\w+)/g)].map((m) => m[1]),
      );
      expect(alerts.filter((a) => !tested.has(a))).toEqual([]);
    },
  );

  it('the rules and the dashboard read only metrics attest exports', async () => {
    const names = await exported();
    const rules = metricNames(readFileSync(RULES, 'utf8'));
    const dashboard = metricNames(readFileSync(DASHBOARD, 'utf8'));
    expect(rules.size).toBeGreaterThan(5);
    expect([...rules].filter((n) => !names.has(n))).toEqual([]);
    expect([...dashboard].filter((n) => !names.has(n))).toEqual([]);
  });

  it('the dashboard has a panel for each thing operators watch', () => {
    const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as {
      panels: { title: string; targets: { expr: string }[] }[];
    };
    const read = (title: RegExp) =>
      dashboard.panels
        .filter((p) => title.test(p.title))
        .flatMap((p) => p.targets.map((t) => t.expr));
    expect(read(/^Verifications by outcome$/).join()).toContain('attest_verifications_total');
    expect(read(/^Rejections by reason$/).join()).toContain('outcome="rejected"');
    expect(read(/^Latency/).join()).toContain('attest_http_request_duration_seconds_bucket');
    expect(read(/^Google/).join()).toContain('attest_google_requests_total');
    expect(read(/receipt refreshes/).join()).toContain('attest_apple_receipt_refresh_total');
    expect(read(/^Database breaker$/).join()).toContain('attest_database_breaker_open');
  });

  it('the verification panels show live keys unless the operator picks test: a rehearsal moves no live panel', () => {
    const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as {
      panels: { title: string; targets?: { expr: string }[] }[];
      templating: { list: { name: string; query?: string; current?: { value: unknown } }[] };
    };
    const verifications = dashboard.panels
      .flatMap((p) => p.targets ?? [])
      .map((t) => t.expr)
      .filter((e) => e.includes('attest_verifications_total'));
    expect(verifications.length).toBeGreaterThan(3);
    for (const expr of verifications)
      expect(expr).toMatch(/attest_verifications_total\{[^}]*mode=~"\$mode"/);
    const mode = dashboard.templating.list.find((v) => v.name === 'mode');
    expect(mode?.query?.split(',')).toEqual(['live', 'test', 'unknown']);
    expect(mode?.current?.value).toEqual(['live', 'unknown']);
  });
});
