import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CHECK_TITLES } from '../../src/core/checkTitles.js';
import { REJECT_REASONS } from '../../src/core/rejectReasons.js';
import { CONSUME_REJECT_REASONS } from '../../src/core/consumeResult.js';

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');

describe('docs/checks.md is the reference of every id, reason and hint', () => {
  const doc = read('docs/checks.md');

  it.each(Object.entries(CHECK_TITLES))('names check %s with its title', (id, title) => {
    expect(doc).toContain(`| \`${id}\` | ${title.replace(/\|/g, '\\|')} |`);
  });

  it.each(REJECT_REASONS)('names reason %s', (reason) => {
    expect(doc).toContain(`\`${reason}\``);
  });

  it.each(CONSUME_REJECT_REASONS)(
    'names consume reason %s, which result-tokens.md explains',
    (reason) => {
      expect(doc).toContain(`\`${reason}\``);
      expect(read('docs/result-tokens.md')).toContain(`| \`${reason}\` |`);
    },
  );

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

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

describe('links between the documents resolve', () => {
  const pages = [
    'README.md',
    ...readdirSync(new URL('../../docs/', import.meta.url))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`),
  ];
  it.each(pages)('%s links only to files and headings that exist', (page) => {
    const text = read(page).replace(/^```[\s\S]*?^```/gm, ''); // code is not prose
    const dir = dirname(page);
    const broken: string[] = [];
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/i.test(target!)) continue; // http(s), mailto: not ours to check
      const [file, anchor] = target!.split('#') as [string, string | undefined];
      const path = file === '' ? page : join(dir, file);
      if (!existsSync(new URL(`../../${path}`, import.meta.url))) {
        broken.push(target!);
        continue;
      }
      if (anchor === undefined || !path.endsWith('.md')) continue;
      const headings = [...read(path).matchAll(/^#{1,6} (.+)$/gm)].map((m) => slug(m[1]!));
      if (!headings.includes(anchor)) broken.push(target!);
    }
    expect(broken).toEqual([]);
  });
});

describe('the front door names every evidence kind', () => {
  const kinds = ['App Attest', 'Play Integrity', 'key attestation'];
  it('the README opening, the package description and the OpenAPI description', () => {
    const opening = read('README.md').split('## Quick start')[0]!;
    const description = (JSON.parse(read('package.json')) as { description: string }).description;
    const openapi = read('src/server/openapi.ts');
    for (const kind of kinds) {
      expect(opening, kind).toContain(kind);
      expect(description, kind).toContain(kind);
      expect(openapi, kind).toContain(kind);
    }
  });
  it('docs/http-api.md and docs/rp-client.md list each details object', () => {
    for (const doc of ['docs/http-api.md', 'docs/rp-client.md']) {
      for (const details of ['appleTokenDetails', 'googleTokenDetails', 'androidKeyDetails'])
        expect(read(doc), `${doc} ${details}`).toContain(details);
    }
  });
});
