import { Box, Text, useApp, useInput } from 'ink';
import { useEffect, useState } from 'react';
import type { StatsTotal } from '../../db/statsDimensions.js';
import { clean, fit } from '../logs/formatLog.js';
import { useTerminalSize } from '../logs/useLogStore.js';
import { groupTotals, topReasons, valueLabel, type StatsGroup } from './statsSummary.js';

/** The minutes the live view counts over (every number on it is a count over this window). */
export const WATCH_WINDOW_MINUTES = 5;

export interface StatsWatchProps {
  /** the per-app totals of the last WATCH_WINDOW_MINUTES (all instances) */
  load: () => Promise<readonly StatsTotal[]>;
  /** default 2000 */
  refreshMs?: number;
  /** what the header says is filtered (--app, --key, --service) */
  filters?: string;
  now?: () => Date;
  onQuit?: () => void;
}

type Loaded = { at: Date; groups: StatsGroup[] } | null;

/**
 * `attest stats --watch`: per-app counts over the last minutes, refreshed, until `q`. One unit
 * throughout: the columns and the reasons under them are counts over the same window.
 */
export function StatsWatch({ load, refreshMs = 2000, filters, now, onQuit }: StatsWatchProps) {
  const { exit } = useApp();
  const { columns } = useTerminalSize();
  const [loaded, setLoaded] = useState<Loaded>(null);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    let stopped = false;
    let timer: NodeJS.Timeout | undefined;
    // one read at a time: the next starts refreshMs after the last answer, however slow it was
    const tick = () => {
      load()
        .then(
          (totals) => {
            if (stopped) return;
            setLoaded({ at: (now ?? (() => new Date()))(), groups: groupTotals(totals) });
            setError(null);
          },
          (err: unknown) => {
            if (!stopped) setError(err instanceof Error ? err.message : String(err));
          },
        )
        .finally(() => {
          if (!stopped) timer = setTimeout(tick, refreshMs);
        });
    };
    tick();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [load, refreshMs, now]);

  useInput((input, key) => {
    if (input === 'q' || key.escape) (onQuit ?? exit)();
  });

  const width = Math.max(60, columns);
  const names = (loaded?.groups ?? []).map((g) => clean(valueLabel(g.value, 'app')));
  const appWidth = Math.min(48, Math.max(12, ...names.map((n) => n.length)));
  const rate = (n: number) => fit(String(n), 10, 'right');
  return (
    <Box flexDirection="column">
      <Text bold wrap="truncate">
        {fit(
          `attest stats · counts over the last ${WATCH_WINDOW_MINUTES} min, all instances${filters ? ` · ${filters}` : ''}${loaded ? ` · ${loaded.at.toISOString().slice(11, 19)}Z` : ''}`,
          width,
        )}
      </Text>
      <Text dimColor wrap="truncate">
        {fit('APP', appWidth)} {fit('VALID', 10, 'right')} {fit('REJECTED', 10, 'right')}{' '}
        {fit('OBSERVED', 10, 'right')} {fit('ERROR', 10, 'right')}
      </Text>
      {loaded === null ? (
        <Text dimColor>{error ? '' : 'reading…'}</Text>
      ) : loaded.groups.length === 0 ? (
        <Text dimColor>no verifications in the last {WATCH_WINDOW_MINUTES} minutes</Text>
      ) : (
        loaded.groups.map((g, i) => (
          <Box key={g.value ?? ''} flexDirection="column">
            <Text wrap="truncate">
              {fit(names[i]!, appWidth)} <Text color="green">{rate(g.valid)}</Text>{' '}
              <Text color="red">{rate(g.rejected)}</Text>{' '}
              <Text color="yellow">{rate(g.observed)}</Text> {rate(g.error)}
            </Text>
            {/* the observed reasons beside the rejected ones: what enforcing them would add */}
            <Text wrap="truncate">
              {'  '}
              <Text dimColor>rejected </Text>
              <Text color="red">{clean(topReasons(g.rejectedReasons, 3) || '-')}</Text>
              <Text dimColor> │ observed </Text>
              <Text color="yellow">{clean(topReasons(g.observedReasons, 3) || '-')}</Text>
            </Text>
          </Box>
        ))
      )}
      {error ? <Text color="red">{clean(`cannot read the statistics: ${error}`)}</Text> : null}
      <Text dimColor>
        q quits · refreshed every{' '}
        {refreshMs >= 1000 ? `${Math.round(refreshMs / 1000)} s` : `${refreshMs} ms`}
      </Text>
    </Box>
  );
}
