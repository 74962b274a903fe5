import type { AppScope } from '../core/appScope.js';
import type { KeyMode } from '../core/ports.js';

/** Fields of the one log line a request writes; middlewares and handlers fill them in. */
export interface RequestLog {
  requestId: string;
  method: string;
  route: string;
  apiKeyId?: string;
  /** the API key's mode */
  mode?: KeyMode;
  approach?: 'session' | 'sessionless';
  service?: string;
  isValid?: boolean;
  reason?: string;
  detail?: string;
  keyId?: string;
  packageName?: string;
  appId?: string;
  /** App Attest registration: what its receipt was, and what failed in it */
  receipt?: 'valid' | 'missing' | 'invalid';
  receiptProblem?: string;
  /** device recall writes: the bits asked for (`first=true,third=false`), whether Google wrote them, its status */
  recallBits?: string;
  written?: boolean;
  googleStatus?: number;
  /** a valid verify: the observed rules that failed (recorded, not enforced); absent when none */
  observed?: string[];
  auth?: string;
  /**
   * the client's address as the failure budget counts it (set only with ATTEST_TRUSTED_PROXIES:
   * the forwarded address when a trusted proxy sent the request, else the peer)
   */
  client?: string;
  /** a consumed result token's id (never the token) and whether it had been consumed before */
  jti?: string;
  alreadyConsumed?: boolean;
  err?: { type: string; code?: string; message: string };
}

/**
 * Runs one backend call within what is left of the request's deadline. Given a function, calls it
 * only when the call may go ahead (not while the database breaker is open: nothing is queued).
 */
export type Budget = <T>(work: Promise<T> | (() => Promise<T>)) => Promise<T>;

/** The Hono environment of the HTTP API: what the middlewares set for the handlers. */
export type AppEnv = {
  Variables: {
    log: RequestLog;
    keyId: string;
    mode: KeyMode;
    backend: Budget;
    /** the key's valid verifies carry a result token */
    resultTokens: boolean;
    /** the key's rejections say why (`keys create --rejection-details`) */
    rejectionDetails: boolean;
    /** the apps the key may verify (`keys create --apps`); null: every allowlisted app */
    apps: AppScope;
  };
  /** what @hono/node-server passes: Node's request and response (absent under app.request) */
  Bindings: {
    incoming?: {
      socket?: { remoteAddress?: string };
      headersDistinct?: Record<string, string[] | undefined>;
    };
    outgoing?: { setHeader(name: string, value: string): unknown };
  };
};
