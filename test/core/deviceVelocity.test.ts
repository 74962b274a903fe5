import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  checkDeviceVelocity,
  isDeviceLimit,
  windowStartOf,
  type DeviceVelocityInput,
} from '../../src/core/deviceVelocity.js';
import { createMemoryDeviceVelocity } from '../../src/core/memoryStores.js';
import { TraceRecorder } from '../../src/core/trace.js';

const AT = new Date('2026-11-22T12:34:56.789Z');

describe('windowStartOf', () => {
  it.each([
    [60, '2026-11-22T12:34:00.000Z'],
    [3600, '2026-11-22T12:00:00.000Z'],
    [86_400, '2026-11-22T00:00:00.000Z'],
    // a week since the epoch (a Thursday)
    [604_800, '2026-11-19T00:00:00.000Z'],
  ])('a %i s window holding the instant starts at %s', (period, start) => {
    expect(windowStartOf(AT, period).toISOString()).toBe(start);
  });

  it('an instant on a boundary opens the next window', () => {
    const boundary = new Date('2026-11-22T13:00:00Z');
    expect(windowStartOf(boundary, 3600)).toEqual(boundary);
    expect(windowStartOf(new Date(boundary.getTime() - 1), 3600).toISOString()).toBe(
      '2026-11-22T12:00:00.000Z',
    );
  });
});

it('isDeviceLimit holds the bounds: N 1 to 1000000, PERIOD 60 s to 30 days, whole numbers', () => {
  expect(isDeviceLimit({ max: 1, periodSeconds: 60 })).toBe(true);
  expect(isDeviceLimit({ max: 1_000_000, periodSeconds: 30 * 86_400 })).toBe(true);
  for (const bad of [
    { max: 0, periodSeconds: 60 },
    { max: 1_000_001, periodSeconds: 60 },
    { max: 1.5, periodSeconds: 60 },
    { max: 1, periodSeconds: 59 },
    { max: 1, periodSeconds: 30 * 86_400 + 1 },
  ])
    expect(isDeviceLimit(bad), JSON.stringify(bad)).toBe(false);
});

describe('the device velocity step', () => {
  const keyId = randomBytes(32);
  const step = (
    over: Partial<DeviceVelocityInput> & Pick<DeviceVelocityInput, 'store'>,
  ): { trace: TraceRecorder; run: Promise<Awaited<ReturnType<typeof checkDeviceVelocity>>> } => {
    const trace = new TraceRecorder();
    trace.plan(['android.deviceVelocity']);
    return {
      trace,
      run: checkDeviceVelocity({
        check: 'android.deviceVelocity',
        service: 'android-key',
        keyId,
        owner: 'com.example.app',
        limit: { max: 2, periodSeconds: 60 },
        now: AT,
        trace,
        ...over,
      }),
    };
  };

  it('passes up to N, then yields device_rate_exceeded (without throwing)', async () => {
    const store = createMemoryDeviceVelocity();
    for (let i = 1; i <= 2; i++) {
      const { trace, run } = step({ store });
      expect(await run).toEqual({ ok: true });
      expect(trace.finish()[0]).toMatchObject({
        id: 'android.deviceVelocity',
        status: 'pass',
        detail: expect.stringContaining(`verify ${i} of at most 2`),
      });
    }
    const { run } = step({ store });
    expect(await run).toEqual({
      ok: false,
      reason: 'device_rate_exceeded',
      detail: expect.stringMatching(/already made 2 valid verifies .*com\.example\.app allows 2/),
    });
    // the next window starts again
    expect(await step({ store, now: new Date('2026-11-22T12:35:00Z') }).run).toEqual({ ok: true });
  });

  it('without a limit: skipped, nothing counted, no store needed', async () => {
    const { trace, run } = step({ store: undefined, limit: null });
    expect(await run).toEqual({ ok: true });
    expect(trace.finish()[0]).toMatchObject({ id: 'android.deviceVelocity', status: 'skip' });
  });

  it('a limit with no store is a fault, never a guess', async () => {
    await expect(step({ store: undefined }).run).rejects.toThrow(/no device velocity store/);
  });
});

describe('createMemoryDeviceVelocity', () => {
  const verify = (over: { at?: Date; periodSeconds?: number; service?: 'apple' } = {}) => {
    const at = over.at ?? AT;
    const periodSeconds = over.periodSeconds ?? 3600;
    return {
      keyId: new Uint8Array(32),
      service: over.service ?? ('android-key' as const),
      windowStart: windowStartOf(at, periodSeconds),
      periodSeconds,
      at,
    };
  };

  it('counts per key and service, rolls over, restarts under another period', async () => {
    const store = createMemoryDeviceVelocity();
    expect(await store.count(verify())).toBe(1);
    expect(await store.count(verify())).toBe(2);
    expect(await store.count(verify({ service: 'apple' }))).toBe(1);
    // a late clock (previous window) counts into the newer one
    expect(await store.count(verify({ at: new Date('2026-11-22T11:59:00Z') }))).toBe(3);
    expect(await store.count(verify({ at: new Date('2026-11-22T13:00:00Z') }))).toBe(1);
    expect(
      await store.count(verify({ at: new Date('2026-11-22T13:00:00Z'), periodSeconds: 60 })),
    ).toBe(1);
  });

  it('read-only (verify-file) answers the count but keeps nothing', async () => {
    const store = createMemoryDeviceVelocity({ readOnly: true });
    expect(await store.count(verify())).toBe(1);
    expect(await store.count(verify())).toBe(1);
    expect(store.windows.size).toBe(0);
  });
});
