import { Hono } from 'hono';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { AppEnv } from '../../../src/server/appEnv.js';
import {
  backendBudget,
  createBudget,
  DeadlineExceeded,
} from '../../../src/server/middleware/backendBudget.js';
import { DatabaseUnavailableError } from '../../../src/db/errors.js';

afterEach(() => {
  vi.useRealTimers();
});

const never = () => new Promise<never>(() => {});
const after = (ms: number, value: string) =>
  new Promise<string>((resolve) => setTimeout(resolve, ms, value));

describe('createBudget', () => {
  it('passes answers through and counts only the time spent waiting on the backend', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const budget = createBudget(100);
    const first = budget(after(60, 'row'));
    await vi.advanceTimersByTimeAsync(60);
    await expect(first).resolves.toBe('row');
    await vi.advanceTimersByTimeAsync(1000); // time between backend calls is free
    const second = budget(never());
    let settled = false;
    second.catch(() => {}).finally(() => (settled = true));
    await vi.advanceTimersByTimeAsync(39);
    expect(settled).toBe(false);
    await vi.advanceTimersByTimeAsync(2);
    await expect(second).rejects.toBeInstanceOf(DeadlineExceeded);
  });

  it('passes a backend failure through as it is', async () => {
    const budget = createBudget(1000);
    const fault = new Error('connection refused');
    await expect(budget(Promise.reject(fault))).rejects.toBe(fault);
  });
});

describe('backendBudget', () => {
  it('gives each request its own budget; an exceeded one reaches onError as DeadlineExceeded', async () => {
    const app = new Hono<AppEnv>();
    app.use('*', backendBudget({ deadlineMs: 20 }));
    app.get('/hang', async (c) => c.text(await c.get('backend')(never())));
    app.get('/fast', async (c) => c.text(await c.get('backend')(Promise.resolve('ok'))));
    const seen: unknown[] = [];
    app.onError((err, c) => {
      seen.push(err);
      return c.json({ statusCode: 268505088, errorMessage: 'Internal error' }, 500);
    });
    const res = await app.request('/hang');
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({ statusCode: 268505088, errorMessage: 'Internal error' });
    expect(seen[0]).toBeInstanceOf(DeadlineExceeded);
    expect((seen[0] as Error).message).toBe('no answer from the backend within 20 ms');
    const fast = await app.request('/fast');
    expect(fast.status).toBe(200);
    expect(await fast.text()).toBe('ok');
  });
});

describe('createBudget with a breaker', () => {
  const breaker = (open: boolean) => {
    const listeners = new Set<() => void>();
    const state = { open, failed: [] as unknown[], suspected: 0 };
    return {
      state,
      open: () => {
        state.open = true;
        for (const l of listeners) l();
      },
      check: () => {
        if (state.open) throw new DatabaseUnavailableError('down');
      },
      failed: (err: unknown) => void state.failed.push(err),
      suspect: () => void state.suspected++,
      onOpen: (l: () => void) => (listeners.add(l), () => listeners.delete(l)),
    };
  };

  it('open: fails at once and does not call the work it was given as a function', async () => {
    const b = breaker(true);
    let called = 0;
    const budget = createBudget(5000, b);
    await expect(budget(() => (called++, Promise.resolve('row')))).rejects.toBeInstanceOf(
      DatabaseUnavailableError,
    );
    expect(called).toBe(0);
  });

  it('a call in flight fails when the breaker opens; a connection error is reported to it', async () => {
    const b = breaker(false);
    const budget = createBudget(5000, b);
    const pending = budget(never());
    b.open();
    await expect(pending).rejects.toBeInstanceOf(DatabaseUnavailableError);
    const refused = Object.assign(new Error('refused'), { code: 'ECONNREFUSED' });
    b.state.open = false;
    await expect(budget(Promise.reject(refused))).rejects.toBe(refused);
    expect(b.state.failed).toEqual([refused]);
  });
});
