import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { postgresTarget, postgresUrlProblem } from '../../src/db/postgresUrl.js';
import { redactUrl } from '../../src/db/redactUrl.js';

const TWO = 'postgres://attest:s3cret@db1:5432,db2:5433/attest?target_session_attrs=read-write';

describe('a DATABASE_URL naming several hosts', () => {
  it('is accepted with target_session_attrs=read-write (or primary), with IPv6 and default ports', () => {
    expect(postgresUrlProblem(TWO)).toBeUndefined();
    expect(
      postgresUrlProblem('postgres://u@[::1]:5432,db2/a?target_session_attrs=primary'),
    ).toBeUndefined();
    expect(postgresUrlProblem('postgresql://u@db/a')).toBeUndefined();
    expect(postgresUrlProblem('postgres://u@/a?host=/run/postgresql')).toBeUndefined();
  });

  it('is refused at start with one line naming what is wrong, never the password', () => {
    const cases: [string, RegExp][] = [
      [
        'postgres://u:pw@db1:5432,db2:99999/a?target_session_attrs=read-write',
        /a port that is not from 1 to 65535/,
      ],
      ['postgres://u:pw@db1:5432,:5433/a?target_session_attrs=read-write', /an empty host/],
      ['postgres://u:pw@db1:54x2,db2/a?target_session_attrs=read-write', /not host or host:port/],
      ['postgres://u:pw@db1,db2/a', /several hosts but not \?target_session_attrs=read-write/],
      ['postgres://u:pw@db1,db2/a?target_session_attrs=standby', /several hosts but not/],
      [
        'postgres://u:pw@db1/a?target_session_attrs=readwrite',
        /target_session_attrs "readwrite": use read-write/,
      ],
    ];
    for (const [url, problem] of cases) {
      expect(postgresUrlProblem(url)).toMatch(problem);
      let thrown: unknown;
      try {
        loadConfig({}, { DATABASE_URL: url });
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(ConfigError);
      const message = (thrown as Error).message;
      expect(message).toMatch(/^environment variable DATABASE_URL /);
      expect(message).toMatch(problem);
      expect(message).not.toContain('pw');
      expect(message).not.toContain('\n');
    }
  });

  it('reaches postgres.js with read-write as primary: a hot standby reports default_transaction_read_only off', () => {
    expect(postgresTarget(TWO)).toEqual({ url: TWO, options: { target_session_attrs: 'primary' } });
    expect(postgresTarget('postgres://u@db/a').options).toEqual({});
    expect(postgresTarget('postgres:///a?host=/run/pg&target_session_attrs=read-write')).toEqual({
      url: 'postgres:///a?target_session_attrs=read-write',
      host: '/run/pg',
      options: { host: '/run/pg', target_session_attrs: 'primary' },
    });
  });

  it('is shown without its password', () => {
    expect(redactUrl(TWO)).toBe(
      'postgres://attest:***@db1:5432,db2:5433/attest?target_session_attrs=read-write',
    );
    expect(redactUrl('postgres://attest@db1,db2/attest')).toBe('postgres://attest@db1,db2/attest');
    expect(redactUrl('postgres://a:b@c@db1,db2/x')).toBe('postgres://a:***@db1,db2/x');
  });
});
