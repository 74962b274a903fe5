/**
 * The one line serve and dev up print when a server does not start, read from the fault base:
 * the same port line for both (it used to differ), a fault's own line, else "cannot start".
 */
import { expect, it } from 'vitest';
import { ConfigError } from '../../src/config.js';
import { DatabaseUnavailableError } from '../../src/db/errors.js';
import { MigrationsPendingError } from '../../src/db/migrate.js';
import { startProblem } from '../../src/cli/startProblem.js';

const cfg = { port: 8080, host: '127.0.0.1' };
const line = (err: unknown) => {
  const e = startProblem(err, cfg);
  return { message: e.message, exitCode: e.exitCode, helpHint: e.helpHint };
};

it('a port in use names --port and PORT; a fault says its own line; anything else cannot start', () => {
  const inUse = Object.assign(new Error('listen EADDRINUSE'), { code: 'EADDRINUSE' });
  expect(line(inUse)).toEqual({
    message: 'port 8080 on 127.0.0.1 is in use: pick another with --port or PORT',
    exitCode: 3,
    helpHint: false,
  });
  expect(line(new DatabaseUnavailableError('cannot reach the database at x: refused'))).toEqual({
    message: 'cannot reach the database at x: refused',
    exitCode: 3,
    helpHint: false,
  });
  expect(line(new ConfigError('environment variable PORT is bad'))).toEqual({
    message: 'environment variable PORT is bad; fix it and run again',
    exitCode: 2,
    helpHint: false,
  });
  expect(
    line(new ConfigError('ATTEST_MASTER_KEY_FILE (k) is not a master key', { fixIt: false })),
  ).toMatchObject({ message: 'ATTEST_MASTER_KEY_FILE (k) is not a master key', exitCode: 2 });
  // a start refused for pending migrations keeps its "cannot start" (the CLI's other commands say the bare line)
  expect(line(new MigrationsPendingError('db', 2)).message).toMatch(
    /^cannot start: the database at db lacks 2/,
  );
});
