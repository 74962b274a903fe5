import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CHECK_TITLES } from '../../src/core/checkTitles.js';
import { REJECT_REASONS } from '../../src/core/reasons.js';

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');

describe('docs/checks.md is the reference of every id, reason and hint', () => {
  const doc = read('docs/checks.md');

  it.each(Object.entries(CHECK_TITLES))('names check %s with its title', (id, title) => {
    expect(doc).toContain(`| \`${id}\` | ${title.replace(/\|/g, '\\|')} |`);
  });

  it.each(REJECT_REASONS)('names reason %s', (reason) => {
    expect(doc).toContain(`\`${reason}\``);
  });

  it('names every hint code verify-file can give', () => {
    // the Hint code union in explain.ts is the list of codes
    const union = /code:\s*((?:\s*\|\s*'[a-z0-9_]+')+);/.exec(read('src/core/explain.ts'));
    const codes = [...(union?.[1] ?? '').matchAll(/'([a-z0-9_]+)'/g)].map((m) => m[1]!);
    expect(codes.length).toBeGreaterThan(10);
    for (const code of codes) expect(doc, code).toContain(`| \`${code}\` |`);
  });
});

describe('the project cites its own documents', () => {
  it('the README links each contract document, and each exists', () => {
    const readme = read('README.md');
    for (const doc of ['docs/http-api.md', 'docs/token-format.md', 'docs/checks.md']) {
      expect(readme).toContain(`(${doc})`);
      expect(read(doc).length).toBeGreaterThan(500);
    }
  });
});
