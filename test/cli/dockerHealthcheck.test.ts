/**
 * The Docker HEALTHCHECK is the liveness probe: it asks /healthz (never /readyz, which a database
 * outage turns to 503), and its exit code follows the answer. The command is taken from the
 * Dockerfile and run as Docker would run it.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const dockerfile = readFileSync(new URL('../../Dockerfile', import.meta.url), 'utf8');
const script = /^HEALTHCHECK .*CMD node -e "(.*)"$/m.exec(dockerfile)?.[1];

const paths: string[] = [];
let status = 200;
let server: Server;
beforeAll(async () => {
  server = createServer((req, res) => {
    paths.push(req.url ?? '');
    res.statusCode = req.url === '/healthz' ? status : 503; // as if the database were down
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const probe = () =>
  new Promise<number>((resolve) => {
    const port = String((server.address() as AddressInfo).port);
    execFile(
      process.execPath,
      ['-e', script!],
      { env: { ...process.env, PORT: port }, timeout: 20_000 },
      (err) => resolve(err ? Number(err.code ?? 1) : 0),
    );
  });

describe('Docker HEALTHCHECK', () => {
  it('is documented as liveness, /readyz as readiness', () => {
    expect(script).toBeDefined();
    expect(dockerfile).toMatch(/Liveness, not readiness: GET \/healthz/);
    expect(dockerfile).toMatch(/GET \/readyz .* is readiness/);
  });

  it('asks /healthz and passes while it answers 200, even with the database down', async () => {
    status = 200;
    expect(await probe()).toBe(0);
    expect(paths.at(-1)).toBe('/healthz');
    status = 500;
    expect(await probe()).toBe(1);
  });
});
