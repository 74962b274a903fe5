import type {
  AllowlistReader,
  AndroidKeyRecord,
  AndroidKeyStore,
  AndroidPackagePolicy,
  AppleAppPolicy,
  AppleKeyRecord,
  AppleKeyStore,
} from './types.js';

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

/**
 * An App Attest key store held in memory, with the same compare-and-set semantics as the
 * database one. `readOnly` (verify-file) answers writes as the database would but keeps nothing.
 */
export function createMemoryAppleKeyStore(
  initial: readonly AppleKeyRecord[] = [],
  options: { readOnly?: boolean } = {},
): AppleKeyStore & { records: Map<string, AppleKeyRecord> } {
  const records = new Map(initial.map((r) => [hex(r.keyId), { ...r }]));
  return {
    records,
    find: async (keyId) => {
      const r = records.get(hex(keyId));
      return r ? { ...r } : null;
    },
    register: async (record) => {
      if (records.has(hex(record.keyId))) return false;
      if (!options.readOnly) records.set(hex(record.keyId), { ...record });
      return true;
    },
    raiseCounter: async (keyId, counter) => {
      const r = records.get(hex(keyId));
      if (!r || r.counter >= counter) return false;
      if (!options.readOnly) r.counter = counter;
      return true;
    },
    raiseCounterIfUnchanged: async (expected, counter) => {
      const r = records.get(hex(expected.keyId));
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
  const records = new Map(initial.map((r) => [hex(r.keyId), { ...r }]));
  return {
    records,
    find: async (keyId) => {
      const r = records.get(hex(keyId));
      return r ? { ...r } : null;
    },
    register: async (record) => {
      if (records.has(hex(record.keyId))) return false;
      if (!options.readOnly) records.set(hex(record.keyId), { ...record });
      return true;
    },
  };
}
