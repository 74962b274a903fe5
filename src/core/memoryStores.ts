import type {
  AllowlistReader,
  AndroidKeyRecord,
  AndroidKeyStore,
  AndroidPackagePolicy,
  AppleAppPolicy,
  AppleKeyRecord,
  AppleKeyStore,
  DeviceVelocityStore,
  KeyMode,
} from './ports.js';

/** An allowlist held in memory: `verify-file` without a database, and tests. */
export function createMemoryAllowlist(entries: {
  apple?: readonly AppleAppPolicy[];
  android?: readonly AndroidPackagePolicy[];
}): AllowlistReader {
  const apple = [...(entries.apple ?? [])];
  const android = [...(entries.android ?? [])];
  return {
    appleApp: async (appId) => apple.find((a) => a.appId === appId) ?? null,
    appleApps: async () => apple,
    androidPackage: async (name) => android.find((p) => p.packageName === name) ?? null,
    androidPackages: async () => android,
  };
}

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
/** a live key's record under its hex id, a test key's apart (the stores are partitioned by mode) */
const slot = (keyId: Uint8Array, mode: KeyMode | undefined) =>
  (mode ?? 'live') === 'live' ? hex(keyId) : `test:${hex(keyId)}`;

/**
 * An App Attest key store held in memory, with the same compare-and-set semantics as the
 * database one. `readOnly` (verify-file) answers writes as the database would but keeps nothing.
 */
export function createMemoryAppleKeyStore(
  initial: readonly AppleKeyRecord[] = [],
  options: { readOnly?: boolean } = {},
): AppleKeyStore & { records: Map<string, AppleKeyRecord> } {
  const records = new Map(initial.map((r) => [slot(r.keyId, r.mode), { ...r }]));
  return {
    records,
    find: async (keyId, mode) => {
      const r = records.get(slot(keyId, mode));
      return r ? { ...r } : null;
    },
    register: async (record) => {
      if (records.has(slot(record.keyId, record.mode))) return false;
      if (!options.readOnly) records.set(slot(record.keyId, record.mode), { ...record });
      return true;
    },
    raiseCounter: async (keyId, counter, mode) => {
      const r = records.get(slot(keyId, mode));
      if (!r || r.counter >= counter) return false;
      if (!options.readOnly) r.counter = counter;
      return true;
    },
    raiseCounterIfUnchanged: async (expected, counter) => {
      const r = records.get(slot(expected.keyId, expected.mode));
      if (
        !r ||
        r.counter >= counter ||
        r.appId !== expected.appId ||
        r.environment !== expected.environment
      )
        return false;
      if ((r.mode ?? 'live') !== (expected.mode ?? 'live')) return false;
      if ((r.riskMetric ?? null) !== (expected.riskMetric ?? null)) return false;
      if (!Buffer.from(r.publicKey).equals(Buffer.from(expected.publicKey))) return false;
      if (!options.readOnly) r.counter = counter;
      return true;
    },
  };
}

/**
 * An Android key store held in memory, registering as the database does (first one wins).
 * `readOnly` (verify-file) answers writes as the database would but keeps nothing.
 */
export function createMemoryAndroidKeyStore(
  initial: readonly AndroidKeyRecord[] = [],
  options: { readOnly?: boolean } = {},
): AndroidKeyStore & { records: Map<string, AndroidKeyRecord> } {
  const records = new Map(initial.map((r) => [slot(r.keyId, r.mode), { ...r }]));
  return {
    records,
    find: async (keyId, mode) => {
      const r = records.get(slot(keyId, mode));
      return r ? { ...r } : null;
    },
    register: async (record) => {
      if (records.has(slot(record.keyId, record.mode))) return false;
      if (!options.readOnly) records.set(slot(record.keyId, record.mode), { ...record });
      return true;
    },
  };
}

/** A key's current window, as the database row holds it. */
export interface DeviceWindow {
  windowStart: Date;
  periodSeconds: number;
  count: number;
  lastAt: Date;
}

/**
 * Per-device verify counts held in memory, windowed as the database counts them (a newer window
 * or another period starts again at 1). `readOnly` (verify-file) answers what the count would be
 * and keeps nothing.
 */
export function createMemoryDeviceVelocity(
  options: { readOnly?: boolean } = {},
): DeviceVelocityStore & { windows: Map<string, DeviceWindow> } {
  const windows = new Map<string, DeviceWindow>();
  return {
    windows,
    count: async (verify) => {
      const id = `${verify.mode ?? 'live'}:${verify.service}:${hex(verify.keyId)}`;
      const w = windows.get(id);
      const same =
        w !== undefined &&
        w.periodSeconds === verify.periodSeconds &&
        w.windowStart.getTime() >= verify.windowStart.getTime();
      if (same && verify.max !== undefined && w.count >= verify.max) return null;
      const next: DeviceWindow = same
        ? {
            ...w,
            count: w.count + 1,
            lastAt: new Date(Math.max(w.lastAt.getTime(), verify.at.getTime())),
          }
        : {
            windowStart: verify.windowStart,
            periodSeconds: verify.periodSeconds,
            count: 1,
            lastAt: verify.at,
          };
      if (!options.readOnly) windows.set(id, next);
      return next.count;
    },
  };
}
