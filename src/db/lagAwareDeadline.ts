import { Fault } from '../core/fault.js';
/** `work` did not settle within its lag-aware deadline. */
export class LagAwareTimeoutError extends Fault {
  override readonly name = 'LagAwareTimeoutError';
  constructor(message: string) {
    super('lag_aware_timeout', message);
  }
}

export interface LagAwareDeadlineOptions {
  /** how late a timer may fire before its window counts as lost to a blocked loop (default ms / 4, at least 50) */
  lateMs?: number;
  /** windows granted again after late ones before the verdict is final (default 5) */
  maxWindows?: number;
}

/**
 * Settles as `work` does, or rejects with LagAwareTimeoutError after `ms` in which the event loop
 * could have read the answer. A timer that fires late means the loop was blocked (a saturated
 * process, not a silent database): the window is granted again. And the verdict waits for
 * setImmediate, which runs after the poll phase, so an answer already in the socket is read before
 * it is declared missing (timers run before sockets are read in each turn of the loop).
 */
export function lagAwareDeadline<T>(
  work: Promise<T>,
  ms: number,
  options: LagAwareDeadlineOptions = {},
): Promise<T> {
  const lateMs = options.lateMs ?? Math.max(50, ms / 4);
  const maxWindows = options.maxWindows ?? 5;
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    let immediate: NodeJS.Immediate | undefined;
    const finish = () => {
      settled = true;
      clearTimeout(timer);
      if (immediate) clearImmediate(immediate);
    };
    work.then(
      (value) => {
        finish();
        resolve(value);
      },
      (err: unknown) => {
        finish();
        reject(err);
      },
    );
    const arm = (windows: number) => {
      const armedAt = performance.now();
      timer = setTimeout(() => {
        const late = performance.now() - armedAt - ms;
        immediate = setImmediate(() => {
          if (settled) return;
          if (late > lateMs && windows < maxWindows) arm(windows + 1);
          else {
            settled = true;
            reject(new LagAwareTimeoutError(`no answer within ${ms} ms`));
          }
        });
      }, ms);
    };
    arm(1);
  });
}
