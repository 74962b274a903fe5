/**
 * `POST /api/v1/android/device-recall`: the RP marks the device behind a Play Integrity token it
 * verified, through Google's device recall write (docs/http-api.md). Answers 200
 * `{"written": true}` when Google wrote the bits, 200 `{"written": false}` for any other end (a
 * token that is not Play Integrity, a package not allowlisted or without a service account, Google
 * refusing, failing or silent past the deadline): the request line logs why, with the API key,
 * the package and the bits, never the token. A malformed body is a 400.
 */
import type { Context } from 'hono';
import { type AppScope, keyAllowsApp } from '../core/appScope.js';
import { z } from 'zod';
import { decodeBase64 } from '../core/base64.js';
import type { KeyCache } from '../core/gms/keyCache.js';
import {
  describeRecallValues,
  findRecallTarget,
  type RecallValues,
} from '../core/gms/recallTarget.js';
import type { AllowlistReader, KeyMode } from '../core/ports.js';
import { liveAllowlist } from '../core/verifiers.js';
import { GoogleFault, type DeviceRecallWriter } from '../upstream/playIntegrityClient.js';
import type { AppEnv } from './appEnv.js';
import { errorBody, STATUS_INVALID_REQUEST } from './errorBody.js';
import { readJson } from './readJson.js';

export const DEVICE_RECALL_PATH = '/api/v1/android/device-recall';
const BODY_LIMIT_BYTES = 64 * 1024;

/** What one write came to; everything but `written` is for the log line. */
export interface RecallWriteResult {
  written: boolean;
  packageName?: string;
  request?: 'classic' | 'standard';
  /** why nothing was written: a reject reason of the token, or `google_refused` / `google_<fault>` */
  reason?: string;
  detail?: string;
  /** the HTTP status Google answered the write with */
  googleStatus?: number;
}

export type DeviceRecallWrite = (input: {
  token: Uint8Array;
  values: RecallValues;
  mode: KeyMode;
  /** the API key's apps: a scoped key writes recall bits for its own packages only */
  scope?: AppScope;
}) => Promise<RecallWriteResult>;

/**
 * The write: find the package and integrity token (core), then ask Google. A refusal, a fault or
 * no answer within the client's timeout is `written: false`; too many Google requests in flight
 * (GoogleBusyError) is thrown, a 503 with Retry-After as for verify.
 * @param deps the allowlist (a live key's view drops test-only pairs), the key cache, Google
 */
export function createDeviceRecallWrite(deps: {
  allowlist: AllowlistReader;
  keyCache: KeyCache;
  google: DeviceRecallWriter;
}): DeviceRecallWrite {
  const live = liveAllowlist(deps.allowlist);
  const importPair = deps.keyCache.get.bind(deps.keyCache);
  return async ({ token, values, mode, scope }) => {
    // Google's recall bits live on the device, which both modes share, and a standard token
    // opened by Google cannot be told from a real device's: a test key never writes them
    // (docs/security.md, "Test mode is a sandbox")
    if (mode === 'test')
      return {
        written: false,
        reason: 'recall_needs_live_key',
        detail: 'a test-mode API key never writes device recall bits (they are on a real device)',
      };
    const target = await findRecallTarget(token, live, importPair);
    if (!target.ok) return { written: false, reason: target.reason, detail: target.detail };
    const { packageName, request } = target;
    // checked once the package is proven (the token opened with that package's keys), as verify does
    if (!keyAllowsApp(scope, packageName))
      return {
        written: false,
        packageName,
        request,
        reason: 'app_not_in_key_scope',
        detail: `package "${packageName}" is not among this API key's apps`,
      };
    try {
      const answer = await deps.google.writeDeviceRecall({
        packageName,
        integrityToken: target.integrityToken,
        serviceAccount: target.serviceAccount,
        newValues: values,
      });
      if (answer.ok) return { written: true, packageName, request };
      return {
        written: false,
        packageName,
        request,
        reason: 'google_refused',
        detail: `Google answered the device recall write with ${answer.problem}`,
        googleStatus: answer.status,
      };
    } catch (err) {
      if (!(err instanceof GoogleFault)) throw err;
      return {
        written: false,
        packageName,
        request,
        reason: `google_${err.code}`,
        detail: err.message,
      };
    }
  };
}

const bitsSchema = z
  .strictObject({
    bitFirst: z.boolean().optional(),
    bitSecond: z.boolean().optional(),
    bitThird: z.boolean().optional(),
  })
  .refine((b) => Object.keys(b).length > 0, 'name at least one of bitFirst, bitSecond, bitThird');
const bodySchema = z.object({ attestationToken: z.string(), bits: bitsSchema });

/** The body's token bytes and bits, or what is wrong with it (a 400). */
export function parseDeviceRecallRequest(
  json: unknown,
): { ok: true; token: Uint8Array; values: RecallValues } | { ok: false; message: string } {
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    return { ok: false, message: 'the body must be a JSON object' };
  const parsed = bodySchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const path = issue?.path.join('.') || 'body';
    if (path === 'attestationToken')
      return { ok: false, message: 'attestationToken is required, as a string' };
    if (issue?.code === 'unrecognized_keys')
      return {
        ok: false,
        message: `bits takes only bitFirst, bitSecond and bitThird (booleans)`,
      };
    return {
      ok: false,
      message:
        path === 'bits' && issue?.code === 'custom'
          ? `bits must ${issue.message}`
          : `${path} must be ${path === 'bits' ? 'an object of booleans' : 'a boolean'}`,
    };
  }
  const token = decodeBase64(parsed.data.attestationToken);
  if (!token) return { ok: false, message: 'attestationToken must be non-empty base64' };
  return { ok: true, token, values: parsed.data.bits };
}

/** The route's handler. */
export async function deviceRecallHandler(
  c: Context<AppEnv>,
  write: DeviceRecallWrite | undefined,
) {
  if (!write) return errorBody(c, 404, STATUS_INVALID_REQUEST, 'Not found');
  const log = c.get('log');
  const read = await readJson(c, BODY_LIMIT_BYTES, 413);
  if (!read.ok) return read.response;
  const parsed = parseDeviceRecallRequest(read.json);
  if (!parsed.ok) return errorBody(c, 400, STATUS_INVALID_REQUEST, parsed.message);

  log.recallBits = describeRecallValues(parsed.values);
  const result = await c.get('backend')(() =>
    write({
      token: parsed.token,
      values: parsed.values,
      mode: c.get('mode'),
      scope: c.get('apps'),
    }),
  );
  log.written = result.written;
  if (result.packageName) {
    log.service = 'gms';
    log.packageName = result.packageName;
  }
  if (result.reason) log.reason = result.reason;
  if (result.detail) log.detail = result.detail;
  if (result.googleStatus !== undefined) log.googleStatus = result.googleStatus;
  return c.json({ written: result.written });
}
