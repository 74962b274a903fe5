import type { Command } from 'commander';
import { DEVICE_LIMIT_BOUNDS } from '../core/deviceVelocity.js';
import type { DeviceLimit } from '../core/types.js';
import { parseDuration } from '../duration.js';
import { usageError } from './errors.js';

const FLAG = '--max-verifies-per-device';
const { maxVerifies, periodSeconds } = DEVICE_LIMIT_BOUNDS;

/**
 * Adds `--max-verifies-per-device N/PERIOD` and its `--no-` form to `allowlist add apple|android`.
 * @param counted what a device is for that entry, in the help
 */
export function addDeviceLimitOptions(command: Command, counted: string): Command {
  return command
    .option(
      `${FLAG} <n/period>`,
      `at most N valid verifies per device in each fixed window of PERIOD, e.g. 100/1h or 1000/1d (N 1 to ${maxVerifies.max}, PERIOD 1m to 30d; windows start at multiples of PERIOD since 1970-01-01 UTC); past N a verify is rejected (device_rate_exceeded). A device is ${counted}`,
    )
    .option(`--no-max-verifies-per-device`, 'stop counting verifies per device');
}

/**
 * The flag's value as a policy field: a limit, `null` for `--no-max-verifies-per-device`,
 * undefined when neither was given (the stored value stays). Throws a usage error otherwise.
 */
export function deviceLimitOption(
  value: string | boolean | undefined,
): DeviceLimit | null | undefined {
  if (value === undefined || value === true) return undefined;
  if (value === false) return null;
  const m = /^\s*(\d{1,9})\s*\/\s*(\S+)\s*$/.exec(value);
  if (!m) throw usageError(`${FLAG} takes N/PERIOD such as 100/1h or 1000/1d, got "${value}"`);
  const max = Number(m[1]);
  if (max < maxVerifies.min || max > maxVerifies.max)
    throw usageError(`${FLAG}: N must be ${maxVerifies.min} to ${maxVerifies.max}, got ${m[1]}`);
  const seconds = parseDuration(m[2]!);
  if (seconds === null || seconds < periodSeconds.min || seconds > periodSeconds.max)
    throw usageError(
      `${FLAG}: PERIOD must be a duration from 1m to 30d such as 1h, 1d or 1w, got "${m[2]}"`,
    );
  return { max, periodSeconds: seconds };
}

/** `100/1h`: a limit as the flag writes it (the largest unit that divides the period). */
export function formatDeviceLimit(limit: DeviceLimit): string {
  return `${limit.max}/${formatPeriod(limit.periodSeconds)}`;
}

function formatPeriod(seconds: number): string {
  for (const [unit, size] of [
    ['d', 86_400],
    ['h', 3600],
    ['m', 60],
  ] as const)
    if (seconds % size === 0) return `${seconds / size}${unit}`;
  return `${seconds}s`;
}
