/** What the API key authenticator reads (the key's row) and answers (see apiKeyAuthenticator.ts). */
import type { KeyMode } from '../core/ports.js';

export interface ApiKeyLookup {
  /**
   * The key's row. `mode` absent: live. `origins`: the address prefixes (see `addressPrefix`)
   * that authenticated the key recently, on any instance.
   */
  find(id: string): Promise<{
    id: string;
    hash: string;
    expiresAt: Date | null;
    revokedAt: Date | null;
    mode?: KeyMode;
    origins?: readonly string[];
    /** absent: off */
    resultTokens?: boolean;
    /** rejections say why; absent: off */
    rejectionDetails?: boolean;
    /** the apps the key may verify; absent or null: every allowlisted app */
    apps?: readonly string[] | null;
    /** the key's pre-check (`apiKeyCheck`); absent or null: none yet */
    precheck?: string | null;
  } | null>;
  touch(id: string): Promise<void>;
  /** Stores the pre-check of a key argon2 just verified against `hash`; optional. */
  setPrecheck?(id: string, hash: string, precheck: string): Promise<void>;
  /** Records that `prefix` authenticated the key (shared by every instance); optional. */
  rememberOrigin?(id: string, prefix: string): Promise<void>;
}

export type AuthFailure =
  | 'missing'
  | 'malformed'
  | 'unknown'
  | 'revoked'
  | 'expired'
  | 'mismatch'
  | 'bad_hash'
  | 'busy'
  | 'locked_id'
  | 'locked_address'
  | 'locked_origin';

export type AuthResult =
  | {
      ok: true;
      keyId: string;
      mode: KeyMode;
      resultTokens?: boolean;
      rejectionDetails?: boolean;
      /** present only for a scoped key: the apps it may verify */
      apps?: readonly string[];
    }
  | { ok: false; status: 401 | 403 | 503; why: AuthFailure; keyId?: string };

/** What the request adds to the presented value. */
export interface AuthContext {
  /** the client's address (TCP peer), for the failure limits and the hash queue's fairness */
  address?: string | undefined;
  /** bounds the database reads (not argon2, nor its queue) by the request's backend deadline */
  backend?: Budget;
  /**
   * told the key a value was verified as in this process, before its row is read again: a read
   * that throws (the database away) leaves a fault whose request is still that key's (counts,
   * the log line), never a grant
   */
  known?(keyId: string, mode: KeyMode): void;
}

type Budget = <T>(work: Promise<T> | (() => Promise<T>)) => Promise<T>;
