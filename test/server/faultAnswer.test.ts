/** The HTTP answer to a fault, read from the fault base (and the driver's codes for its errors). */
import { expect, it } from 'vitest';
import { DatabaseTimeoutError } from '../../src/db/databaseDeadline.js';
import { DatabaseUnavailableError } from '../../src/db/errors.js';
import { GoogleBusyError, GoogleFault } from '../../src/upstream/playIntegrityClient.js';
import { DeadlineExceeded } from '../../src/server/middleware/backendBudget.js';
import { faultAnswer } from '../../src/server/faultAnswer.js';

it('Retry-After, 503 and the timeout signal come from the fault; a plain error gets none', () => {
  expect(faultAnswer(new GoogleBusyError('busy'))).toEqual({
    retryAfterSeconds: 1,
    unavailable: 'Busy, retry shortly',
  });
  expect(faultAnswer(new DatabaseUnavailableError('down'))).toEqual({
    retryAfterSeconds: 1,
    unavailable: 'Database unavailable, retry shortly',
  });
  // inside drizzle's wrapper too
  expect(
    faultAnswer(new Error('failed query', { cause: new DatabaseTimeoutError('slow') })),
  ).toEqual({
    retryAfterSeconds: 1,
    unavailable: 'Database unavailable, retry shortly',
    timeout: true,
  });
  expect(faultAnswer(new DeadlineExceeded('late'))).toEqual({
    retryAfterSeconds: 1,
    timeout: true,
  });
  expect(faultAnswer(new GoogleFault('timeout', 'x')).retryAfterSeconds).toBe(1);
  expect(faultAnswer(new GoogleFault('server_error', 'x')).retryAfterSeconds).toBe(1);
  expect(faultAnswer(new GoogleFault('rate_limited', 'x')).retryAfterSeconds).toBe(30);
  expect(faultAnswer(new GoogleFault('credentials', 'x')).retryAfterSeconds).toBe(60);
  expect(faultAnswer(new Error('bug'))).toEqual({});
  // the driver's own: a refused connection, a full disk
  expect(faultAnswer(Object.assign(new Error('x'), { code: 'ECONNREFUSED' }))).toEqual({
    retryAfterSeconds: 1,
    unavailable: 'Database unavailable, retry shortly',
  });
  expect(faultAnswer(Object.assign(new Error('x'), { code: '53100' }))).toEqual({
    retryAfterSeconds: 5,
  });
});
