import { useStdout } from 'ink';
import { useCallback, useEffect, useState, useSyncExternalStore } from 'react';
import type { LogStore, LogStoreSnapshot } from './logStore.js';

/**
 * Reads the log store from a component. The store lives outside React; this is the only place
 * the UI touches it.
 *
 * @param store - the store
 * @param throttleMs - re-render at most this often (0: on every change). Reading a large file
 *   appends thousands of batches a second; the screen needs a few frames a second, and each frame
 *   filters the whole buffer.
 * @returns the current snapshot
 */
export function useLogStore(store: LogStore, throttleMs = 0): LogStoreSnapshot {
  const subscribe = useCallback(
    (onChange: () => void) => {
      if (throttleMs <= 0) return store.subscribe(onChange);
      let timer: NodeJS.Timeout | undefined;
      let last = 0;
      const fire = () => {
        timer = undefined;
        last = Date.now();
        onChange();
      };
      const unsubscribe = store.subscribe(() => {
        if (timer !== undefined) return;
        const wait = last + throttleMs - Date.now();
        if (wait <= 0) fire();
        else timer = setTimeout(fire, wait);
      });
      return () => {
        clearTimeout(timer);
        unsubscribe();
      };
    },
    [store, throttleMs],
  );
  return useSyncExternalStore(subscribe, store.getSnapshot, store.getSnapshot);
}

/**
 * The terminal size, following resizes.
 * @returns columns and rows (80x24 when the output is not a terminal)
 */
export function useTerminalSize(): { columns: number; rows: number } {
  const { stdout } = useStdout();
  const read = useCallback(
    () => ({ columns: stdout.columns || 80, rows: stdout.rows || 24 }),
    [stdout],
  );
  const [size, setSize] = useState(read);
  useEffect(() => {
    const onResize = () => setSize(read());
    stdout.on('resize', onResize);
    return () => {
      stdout.off('resize', onResize);
    };
  }, [stdout, read]);
  return size;
}
