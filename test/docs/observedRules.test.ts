import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { OBSERVABLE_REASONS } from '../../src/core/observedRules.js';

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');

describe('docs/checks.md lists the observable codes of each service, as core has them', () => {
  const doc = read('docs/checks.md');
  it.each(Object.entries(OBSERVABLE_REASONS))('%s', (service, codes) => {
    const row = doc.split('\n').find((line) => line.startsWith(`| \`${service}\` |`));
    expect(row, `a table row for ${service}`).toBeDefined();
    const cell = row!.split('|')[2]!;
    const listed = [...cell.matchAll(/`([a-z0-9_]+)`/g)].map((m) => m[1]);
    expect(listed).toEqual([...codes]);
  });
});
