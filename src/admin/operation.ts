import { z } from 'zod';
import { isMinVerdict } from '../core/gms/deviceVerdict.js';
import type { MinVerdict } from '../core/ports.js';
import type { Auditor } from '../db/audit.js';
import type { DatabaseHandle } from '../db/database.js';
import type { SecretBox } from '../db/secretBox.js';
import { AdminError } from './adminError.js';
import type { UpstreamEndpoints } from './upstreamChecks.js';

/**
 * Where an operation runs: the database handle of the process that owns the database (the
 * running `attest serve`, or the CLI that opened it itself), the master key, and who acts.
 */
export interface OperationContext {
  handle: DatabaseHandle;
  /** the master key's box, checked against the database; `establish: false` records nothing */
  secrets(options?: { establish?: boolean }): Promise<SecretBox>;
  /** who makes the changes; required by the operations that change something */
  auditor?: Auditor;
  /** this process's upstream URLs (its configuration), for status.checkUpstreams */
  upstreams?: UpstreamEndpoints;
}

/** One administrative step on the database: its typed input and the function that runs it. */
export interface Operation<S extends z.ZodType, R> {
  input: S;
  /** true: the running server reloads its caches (API keys, allowlist, development root) after it */
  changes: boolean;
  run(ctx: OperationContext, input: z.output<S>): Promise<R>;
}

/** An operation, typed by its input schema. */
export function operation<S extends z.ZodType, R>(def: Operation<S, R>): Operation<S, R> {
  return def;
}

/** zod's optional keys may hold `undefined`; the repositories take absent keys (exactOptionalPropertyTypes). */
export function stripUndefined<T extends object>(
  value: T,
): { [K in keyof T]: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as never;
}

/** The actor of a change; an operation that changes something refuses to run without one. */
export function auditorOf(ctx: OperationContext): Auditor {
  if (!ctx.auditor) throw new AdminError('usage', 'this change needs an actor for the audit trail');
  return ctx.auditor;
}

/** Bytes in an operation's input (they cross the socket as bytes). */
export const bytes = z.custom<Uint8Array>((v) => v instanceof Uint8Array, 'expected bytes');
export const MIN_VERDICT = z.custom<MinVerdict>(isMinVerdict, 'expected a device verdict');
export const none = z.strictObject({});
