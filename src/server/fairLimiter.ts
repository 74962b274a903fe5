/**
 * Runs at most `concurrency` tasks at once. Waiting tasks are queued per lane (an address
 * prefix) and served round-robin across lanes, priority ones first; at most `perLane` wait in one
 * lane and `queue` in all the ordinary lanes together (and `queue` priority ones). `undefined`
 * when full.
 */
export function createFairLimiter(concurrency: number, queue: number, perLane: number) {
  let running = 0;
  interface Waiting {
    lanes: Map<string, (() => void)[]>;
    size: number;
  }
  const classes: [Waiting, Waiting] = [
    { lanes: new Map(), size: 0 },
    { lanes: new Map(), size: 0 },
  ];
  /** the next waiter: the first lane of the first class that has one (a Map keeps insertion order) */
  function next(): (() => void) | undefined {
    for (const c of classes) {
      for (const [lane, waiters] of c.lanes) {
        const first = waiters.shift()!;
        c.lanes.delete(lane);
        if (waiters.length > 0) c.lanes.set(lane, waiters); // to the back: round-robin
        c.size--;
        return first;
      }
    }
    return undefined;
  }
  return {
    async run<T>(
      task: () => Promise<T>,
      where: { lane: string; priority: boolean },
    ): Promise<T | undefined> {
      if (running < concurrency) running++;
      else {
        const c = classes[where.priority ? 0 : 1];
        const waiters = c.lanes.get(where.lane) ?? [];
        if (c.size >= queue || (!where.priority && waiters.length >= perLane)) return undefined;
        c.lanes.set(where.lane, waiters);
        c.size++;
        await new Promise<void>((resolve) => waiters.push(resolve)); // the finisher hands its slot over
      }
      try {
        return await task();
      } finally {
        const handOver = next();
        if (handOver) handOver();
        else running--;
      }
    },
  };
}
