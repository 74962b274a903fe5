/**
 * The lists derived from core's kind registry (src/core/kinds.ts) are computed when their
 * modules load, so nothing a kind's descriptor loads may load them back: the cycle would leave a
 * list undefined for whichever module happened to load first. Type-only imports do not count.
 */
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { expect, it } from 'vitest';
import { KINDS } from '../../src/core/kinds.js';
import { SRC } from './sourceFiles.js';

const DERIVED = [
  'core/kinds.ts',
  'core/services.ts',
  'core/checkTitles.ts',
  'core/observedRules.ts',
  'core/rejectReasons.ts',
  'core/detailsSchemas.ts',
  'core/explain.ts',
  'core/resultToken.ts',
  'core/verifiers.ts',
  'core/trace.ts',
  'core/verify.ts',
];

/** The modules a file loads when it runs: its relative imports that are not type-only. */
function runtimeImports(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/^(?:import|export)\s+(?!type\s)([^;]*?)\s*from\s*'(\.[^']+)'/gms)]
    .filter(
      (m) =>
        !/^\{[^}]*\}$/s.test(m[1]!.trim()) ||
        !m[1]!
          .replace(/[{}\s]/g, '')
          .split(',')
          .filter(Boolean)
          .every((n) => n.startsWith('type')),
    )
    .map((m) => relative(SRC, resolve(dirname(file), m[2]!)).replace(/\.js$/, '.ts'))
    .map((p) => (p.endsWith('.ts') && !readable(join(SRC, p)) ? p.replace(/\.ts$/, '.tsx') : p));
}

function readable(file: string): boolean {
  try {
    readFileSync(file);
    return true;
  } catch {
    return false;
  }
}

/** Every module `start` loads, transitively. */
function loads(start: string): Set<string> {
  const seen = new Set<string>();
  const todo = [start];
  while (todo.length) {
    const next = todo.pop()!;
    for (const dep of runtimeImports(join(SRC, next)))
      if (!seen.has(dep)) {
        seen.add(dep);
        todo.push(dep);
      }
  }
  return seen;
}

const DESCRIPTORS = [
  ...readFileSync(join(SRC, 'core', 'kinds.ts'), 'utf8').matchAll(/from '\.\/([^']+Kind)\.js'/g),
].map((m) => `core/${m[1]}.ts`);

it('the scan finds every descriptor core/kinds.ts lists', () => {
  expect(DESCRIPTORS.length).toBe(KINDS.length);
});

it.each(DESCRIPTORS)('%s never loads a list derived from the kinds', (descriptor) => {
  expect([...loads(descriptor)].filter((m) => DERIVED.includes(m))).toEqual([]);
});

it('the scan follows runtime imports (verify.ts loads the envelope parser and the trace)', () => {
  expect(loads('core/verify.ts')).toContain('core/trace.ts');
  expect(loads('core/verify.ts')).toContain('core/envelope.ts');
});
