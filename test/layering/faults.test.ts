/**
 * One fault base (src/core/fault.ts): outside the client, every error class builds on it, save
 * the few that are not faults (core's expected refusals, which become rejection values; internal
 * control flow that never leaves its function). The HTTP answer and the CLI's exit read the
 * base's fields; they walk no chain of fault classes.
 */
import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { expect, it } from 'vitest';
import { sources, SRC } from './sourceFiles.js';

// the client package's files: src/client, and the bounded body reader it ships beside it
// (packages/client/package.json), whose BodyTooLargeError the client and the server both read
const CLIENT_PACKAGE = (f: string) =>
  relative(SRC, f).startsWith('client/') || relative(SRC, f) === 'readBoundedBody.ts';
const outsideClient = () => sources(SRC).filter((f) => !CLIENT_PACKAGE(f));

/** `file: Class` for each class of `files` that extends `base` directly. */
function classesExtending(base: string, files: string[]): string[] {
  return files.flatMap((f) =>
    [
      ...readFileSync(f, 'utf8').matchAll(
        new RegExp(`class\\s+(\\w+)\\s+extends\\s+${base}\\b`, 'g'),
      ),
    ].map((m) => `${relative(SRC, f)}: ${m[1]}`),
  );
}

it('at most 6 classes outside the client extend Error directly, each named here with its reason', () => {
  const direct = classesExtending('Error', outsideClient());
  expect(direct.length).toBeLessThanOrEqual(6);
  expect(direct.sort()).toEqual(
    [
      // the base itself
      'core/fault.ts: Fault',
      // expected outcomes, not faults: a rejection becomes a value, CBOR and BER refusals of a
      // client's bytes become rejections inside core (stackless: they are the cheap path)
      'core/reasons.ts: Rejection',
      'core/cbor.ts: CborError',
      'core/berOutline.ts: BerError',
      // control flow that never leaves its function: a rollback signal, a timer's race
      'db/writeHealth.ts: ProbeDone',
      'admin/adminServer.ts: TimeoutError',
    ].sort(),
  );
});

it('the error classes outside the client build on the fault base', () => {
  const faults = classesExtending('Fault', outsideClient());
  expect(faults.length).toBeGreaterThanOrEqual(20);
  expect(faults).toContain('db/errors.ts: DatabaseUnavailableError');
  expect(faults).toContain('cli/errors.ts: CliError');
});

// where faults become HTTP answers and exit codes
const READERS = [
  'server/app.ts',
  'server/faultAnswer.ts',
  'cli/context.ts',
  'cli/startProblem.ts',
  'cli/commands/devUp.ts',
  'cli/commands/serve.ts',
];

it('the HTTP answer and the CLI exit read the fault base, not an instanceof chain of fault classes', () => {
  const faultClasses = new Set(
    [...classesExtending('Fault', outsideClient()), ...classesExtending('Error', outsideClient())]
      .map((c) => c.split(': ')[1]!)
      .filter((name) => name !== 'Fault'),
  );
  const chains = READERS.flatMap((file) =>
    [...readFileSync(join(SRC, file), 'utf8').matchAll(/instanceof\s+(\w+)/g)]
      .map((m) => m[1]!)
      .filter((name) => faultClasses.has(name))
      .map((name) => `${file}: instanceof ${name}`),
  );
  expect(chains).toEqual([]);
  // and they do read it: the HTTP layer through faultAnswer (Fault's fields), the CLI through
  // cliErrorOf (Fault's exit)
  const text = (file: string) => readFileSync(join(SRC, file), 'utf8');
  expect(text('server/app.ts')).toMatch(/faultAnswer\(err\)/);
  expect(text('server/faultAnswer.ts')).toMatch(/faultOf\(err\)/);
  for (const file of ['cli/context.ts', 'cli/startProblem.ts'])
    expect(text(file)).toMatch(/cliErrorOf\(err\)/);
  for (const file of ['cli/commands/devUp.ts', 'cli/commands/serve.ts'])
    expect(text(file)).toMatch(/startProblem\(err, cfg\)/);
});

it('the scan sees classes and instanceof (the client has its own error base)', () => {
  const client = sources(join(SRC, 'client'));
  expect(classesExtending('Error', client)).toContain('client/errors.ts: AttestError');
  expect(classesExtending('AttestError', client)).toContain(
    'client/resultToken.ts: AttestResultTokenError',
  );
});
