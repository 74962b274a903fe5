/**
 * `<package>/client` as an RP imports it: by the package's own name through "exports", in a
 * process of its own. Every module it loads is recorded by a resolve hook: only the client's own
 * files, the bounded body reader it shares with the server (dist/readBoundedBody.js, which the
 * client package ships) and Node built-ins may appear (no hono, drizzle, pino, nor anything from
 * node_modules).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { beforeAll, expect, it } from 'vitest';
import { ROOT, buildOnce } from '../support/binary.js';

const NAME = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { name: string })
  .name;

// runs in the hooks thread; each resolved URL goes to stderr as one line
const HOOKS = `
import { writeSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  writeSync(2, 'loaded ' + result.url + '\\n');
  return result;
}`;
const REGISTER = `import { register } from 'node:module'; register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(HOOKS)}));`;

beforeAll(() => buildOnce(), 120_000);

it(`${NAME}/client loads only its own files, the shared body reader and node: built-ins`, () => {
  const run = spawnSync(
    process.execPath,
    [
      '--import',
      `data:text/javascript,${encodeURIComponent(REGISTER)}`,
      '--input-type=module',
      '-e',
      `const m = await import('${NAME}/client'); console.log(typeof m.createAttestClient);`,
    ],
    { cwd: ROOT, encoding: 'utf8', env: { PATH: process.env.PATH } },
  );
  expect(run.status, run.stderr).toBe(0);
  expect(run.stdout.trim()).toBe('function');
  const loaded = run.stderr
    .split('\n')
    .filter((l) => l.startsWith('loaded '))
    .map((l) => l.slice('loaded '.length));
  const clientDir = pathToFileURL(join(ROOT, 'dist', 'client')).href + '/';
  const shared = [pathToFileURL(join(ROOT, 'dist', 'readBoundedBody.js')).href];
  expect(loaded).toContain(`${clientDir}index.js`);
  expect(loaded).toEqual(expect.arrayContaining(shared));
  expect(
    loaded.filter(
      (url) => !url.startsWith('node:') && !url.startsWith(clientDir) && !shared.includes(url),
    ),
  ).toEqual([]);
});
