/**
 * The layers' import rules, read from the sources: the CLI sits on top, so nothing outside
 * src/cli imports it (the server and the admin operations run without commander or ink); storage
 * sits below the admin transport, the server and the CLI, so nothing in src/db imports them (the
 * admin socket's path rules live in src/socketPath.ts, below both).
 */
import { join, relative } from 'node:path';
import { expect, it } from 'vitest';
import { importsOf, sources, SRC } from './sourceFiles.js';

/** `file -> target` for each import of a file below `dir` into one of `layers`. */
function importsInto(
  dir: string,
  layers: string[],
  except: (file: string) => boolean = () => false,
) {
  return sources(dir)
    .filter((f) => !except(relative(SRC, f)))
    .flatMap((f) =>
      importsOf(f)
        .filter((target) => layers.some((layer) => target.startsWith(layer)))
        .map((target) => `${relative(SRC, f)} -> ${target}`),
    );
}

it('nothing outside src/cli imports src/cli', () => {
  expect(importsInto(SRC, ['cli/'], (f) => f.startsWith('cli/'))).toEqual([]);
});

it('nothing in src/db imports src/admin, src/server or src/cli', () => {
  expect(importsInto(join(SRC, 'db'), ['admin/', 'server/', 'cli/'])).toEqual([]);
});

it('nothing in src/core imports the upstream HTTP clients (src/upstream): it gets them as ports', () => {
  expect(importsInto(join(SRC, 'core'), ['upstream/'])).toEqual([]);
});

it('src/client reaches outside itself only for the shared body reader and core types', () => {
  // the client package ships dist/readBoundedBody.js and core's .d.ts files it names
  // (packages/client/package.json "files"); anything else would be missing from the tarball
  const outside = importsInto(join(SRC, 'client'), [''], () => false).filter(
    (edge) => !edge.split(' -> ')[1]!.startsWith('client/'),
  );
  expect(
    outside.filter(
      (edge) =>
        !edge.endsWith(' -> readBoundedBody.js') &&
        !/ -> core\/(resultTokenClaims|\w+\/\w+TokenDetails)\.js$/.test(edge),
    ),
  ).toEqual([]);
  expect(outside).toContain('client/index.ts -> readBoundedBody.js');
});

it('only the openers import db/client.ts (which may start a PostgreSQL server); repositories import db/database.ts', () => {
  const importers = sources(SRC)
    .filter((f) => importsOf(f).includes('db/client.js'))
    .map((f) => relative(SRC, f))
    .sort();
  expect(importers.filter((f) => f.startsWith('db/'))).toEqual([]);
  expect(importers).toEqual(['cli/context.ts', 'server/clusterWorker.ts', 'server/start.ts']);
  expect(importsOf(join(SRC, 'db', 'sessions.ts'))).toContain('db/database.js');
});

it('the scan sees imports (a CLI file importing the CLI, storage importing the socket rules)', () => {
  expect(importsOf(join(SRC, 'cli', 'main.ts'))).toContain('cli/errors.js');
  expect(importsOf(join(SRC, 'db', 'dataDirLock.ts'))).toContain('socketPath.js');
});
