import { describe, expect, it } from 'vitest';
import { createDatabaseBreaker } from '../../src/db/databaseBreaker.js';
import { DatabaseUnavailableError } from '../../src/db/errors.js';

const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });

/** A probe the test answers: `up` decides whether each probe succeeds. */
function fakeDatabase() {
  const state = { up: true, probes: 0 };
  const probe = async () => {
    state.probes++;
    if (!state.up) throw refused;
  };
  return { state, probe };
}

/** Resolves with the next change the breaker reports. */
function changes() {
  const waiting: ((open: boolean) => void)[] = [];
  return {
    onChange: (open: boolean) => waiting.shift()?.(open),
    next: () => new Promise<boolean>((resolve) => waiting.push(resolve)),
  };
}

describe('createDatabaseBreaker', () => {
  it('a connection error with the database down opens it; open, check throws at once; a probe that answers closes it', async () => {
    const db = fakeDatabase();
    const seen = changes();
    const breaker = createDatabaseBreaker({
      probe: db.probe,
      retryMs: 10,
      onChange: seen.onChange,
    });
    try {
      expect(breaker.isOpen()).toBe(false);
      expect(() => breaker.check()).not.toThrow();
      let released = 0;
      breaker.onOpen(() => released++);
      db.state.up = false;
      const opened = seen.next();
      breaker.failed(refused);
      expect(await opened).toBe(true);
      expect(breaker.isOpen()).toBe(true);
      expect(released).toBe(1);
      expect(() => breaker.check()).toThrow(DatabaseUnavailableError);
      // it keeps probing in the background, and the first probe that answers closes it
      const closed = seen.next();
      db.state.up = true;
      expect(await closed).toBe(false);
      expect(breaker.isOpen()).toBe(false);
      expect(() => breaker.check()).not.toThrow();
    } finally {
      breaker.stop();
    }
  });

  it('a slow call or an error that is not the connection never opens it while the probe answers', async () => {
    let answered!: () => void;
    const probed = new Promise<void>((resolve) => (answered = resolve));
    const db = fakeDatabase();
    const breaker = createDatabaseBreaker({
      probe: async (ms) => {
        await db.probe();
        answered();
        void ms;
      },
    });
    try {
      breaker.failed(new Error('duplicate key value')); // a statement's error: no probe
      expect(db.state.probes).toBe(0);
      breaker.suspect();
      await probed;
      expect(db.state.probes).toBe(1);
      expect(breaker.isOpen()).toBe(false);
      // suspicion is rate-limited: a burst of slow calls is one probe
      for (let i = 0; i < 50; i++) breaker.suspect();
      expect(db.state.probes).toBe(1);
    } finally {
      breaker.stop();
    }
  });

  it('a waiter that unsubscribed is not called', async () => {
    const db = fakeDatabase();
    const seen = changes();
    const breaker = createDatabaseBreaker({
      probe: db.probe,
      retryMs: 10,
      onChange: seen.onChange,
    });
    try {
      let called = 0;
      const unsubscribe = breaker.onOpen(() => called++);
      unsubscribe();
      db.state.up = false;
      const opened = seen.next();
      breaker.suspect();
      await opened;
      expect(called).toBe(0);
    } finally {
      breaker.stop();
    }
  });
});
