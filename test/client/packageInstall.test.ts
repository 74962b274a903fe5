/**
 * The client package on its own, as an RP installs it: packed from the workspace
 * (packages/client), installed from the tarball file into an empty project (no registry
 * needed: it has no dependencies), then imported there, types included.
 */
import { spawnSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ROOT } from '../support/binary.js';

const PACKAGE = join(ROOT, 'packages', 'client');
const manifest = JSON.parse(readFileSync(join(PACKAGE, 'package.json'), 'utf8')) as {
  name: string;
  version: string;
  dependencies?: object;
  scripts?: Record<string, string>;
};
let work: string;

function run(command: string, args: string[], cwd: string) {
  const r = spawnSync(command, args, {
    cwd,
    encoding: 'utf8',
    env: { PATH: process.env.PATH, HOME: process.env.HOME, npm_config_update_notifier: 'false' },
  });
  if (r.status !== 0) throw new Error(`${command} ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'attest-client-'));
  // a fresh clone's layout, without any dist/: the package must build itself when packed
  // (its own prepack), as `npm pack --workspace packages/client` does in a new checkout
  const clone = join(work, 'clone');
  mkdirSync(join(clone, 'packages'), { recursive: true });
  cpSync(PACKAGE, join(clone, 'packages', 'client'), {
    recursive: true,
    filter: (from) => !from.includes(`${join(PACKAGE, 'dist')}`),
  });
  cpSync(join(ROOT, 'src'), join(clone, 'src'), { recursive: true });
  cpSync(join(ROOT, 'tsconfig.json'), join(clone, 'tsconfig.json'));
  cpSync(join(ROOT, 'package.json'), join(clone, 'package.json'));
  symlinkSync(join(ROOT, 'node_modules'), join(clone, 'node_modules'));
  expect(existsSync(join(clone, 'packages', 'client', 'dist'))).toBe(false);
  run(
    'npm',
    ['pack', '--workspace', 'packages/client', '--silent', '--pack-destination', work],
    clone,
  );
}, 180_000);
afterAll(() => rmSync(work, { recursive: true, force: true }));

it('has no runtime dependencies and no install-time scripts', () => {
  expect(manifest.dependencies ?? {}).toEqual({});
  expect(Object.keys(manifest.scripts ?? {})).not.toContain('prepare');
  expect(Object.keys(manifest.scripts ?? {})).not.toContain('install');
});

it(
  'installs from its tarball into an empty project, alone, and imports by name',
  { timeout: 180_000 },
  () => {
    const tgz = join(work, `${manifest.name}-${manifest.version}.tgz`);
    expect(existsSync(tgz)).toBe(true);
    const project = join(work, 'rp');
    run('mkdir', ['-p', project], work);
    writeFileSync(join(project, 'package.json'), '{"name":"rp","version":"1.0.0","type":"module"}');
    run(
      'npm',
      ['install', '--offline', '--no-audit', '--no-fund', '--loglevel=error', tgz],
      project,
    );
    // nothing but the client itself came along
    expect(readdirSync(join(project, 'node_modules')).filter((n) => !n.startsWith('.'))).toEqual([
      manifest.name,
    ]);
    const out = run(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const m = await import('${manifest.name}'); console.log(typeof m.createAttestClient, typeof m.AttestHttpError);`,
      ],
      project,
    );
    expect(out.trim()).toBe('function function');
    // the types an RP's TypeScript resolves through "exports"
    const types = join(project, 'node_modules', manifest.name, 'dist', 'client', 'index.d.ts');
    expect(readFileSync(types, 'utf8')).toContain('createAttestClient');
    writeFileSync(
      join(project, 'check.ts'),
      `import { createAttestClient, type VerifyResult } from '${manifest.name}';\n` +
        `const c = createAttestClient({ baseUrl: 'http://x', apiKey: 'k' });\n` +
        `export const f = async (t: string): Promise<VerifyResult> => c.verify({ attestationToken: t, expectedNonce: 'n' });\n`,
    );
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          noEmit: true,
          skipLibCheck: false,
          lib: ['ES2023', 'DOM'],
          types: [],
        },
        files: ['check.ts'],
      }),
    );
    run(
      process.execPath,
      [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', project],
      project,
    );
  },
);
