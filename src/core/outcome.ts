/** What one verification returns and how its steps are recorded: the outcome and the trace. */
import type {
  AndroidBootState,
  AndroidSecurityLevel,
} from './androidKey/androidKeyTokenDetails.js';
import type { AppleEnvironment, ApplePlatform } from './apple/appleTokenDetails.js';
import type { CheckId } from './checkTitles.js';
import type { RemediationDialog } from './gms/gmsTokenDetails.js';
import type { PlatformDetails } from './kinds.js';
import type { ObservableReason } from './observedRules.js';
import type { RejectReason } from './reasons.js';
import type { Service } from './services.js';

/** `observed`: the check failed, and its entry observes the rule, so the verification went on */
export type CheckStatus = 'pass' | 'fail' | 'skip' | 'observed';

/** One step of a verification, as `verify-file` prints it. `id` is stable (docs/checks.md). */
export interface CheckRecord {
  /** a CheckId, or the reason when a verification fails outside any check */
  id: string;
  status: CheckStatus;
  detail: string;
  reason?: RejectReason;
}

/** Facts a verifier learned on its way, for logs and for `verify-file` hints. Never secrets. */
export interface VerifyFacts {
  service?: Service;
  keyId?: string; // base64
  /** apple, android-key: base64 of the device key's DER SubjectPublicKeyInfo (a result token's cnf.jwk) */
  devicePublicKey?: string;
  packageName?: string;
  appId?: string;
  environment?: AppleEnvironment;
  shape?: 'registration' | 'assertion' | 'attestation+assertion';
  /** apple: the validation category the token or key carries (iOS 27+) */
  validationCategory?: string;
  /** apple: where the key was made (macOS keys carry a key access-control extension) */
  platform?: ApplePlatform;
  /** apple registration: what became of the attestation's receipt */
  receipt?: 'valid' | 'missing' | 'invalid';
  /** apple registration: what failed in the receipt */
  receiptProblem?: string;
  /** gms: when the integrity token says it was issued (ISO 8601) */
  issuedAt?: string;
  /** apple assertion: its counter, and the counter stored for the key */
  counter?: number;
  storedCounter?: number;
  /** gms: set for a standard request (decoded by Google); absent for a classic one */
  request?: 'standard';
  /** gms: the payload field of a verdict the package requires but Google did not give */
  missingVerdict?: string;
  /** gms: the Play dialog the app can show so the user fixes the rejected verdict on the device */
  remediation?: RemediationDialog;
  /** android-key: what the key description says (registration) or the stored key (assertion) */
  securityLevel?: AndroidSecurityLevel;
  verifiedBootState?: AndroidBootState;
  deviceLocked?: boolean;
  osPatchLevel?: number | null;
  /** android-key: the key the top of the chain is signed by, when it is a known one */
  chainRoot?: 'google' | 'aosp-software' | 'configured';
  /** android-key: the serial (hex) of a revoked certificate in the chain */
  revokedSerial?: string;
  /** android-key: the attested device looks like an emulator (its attested product or model) */
  emulator?: boolean;
}

export type VerifyOutcome =
  | {
      ok: true;
      details: PlatformDetails;
      checks: CheckRecord[];
      facts: VerifyFacts;
      /** the observed rules that failed (each once, in the order they failed); absent when none */
      observed?: ObservableReason[];
    }
  | { ok: false; reason: RejectReason; detail: string; checks: CheckRecord[]; facts: VerifyFacts };

/**
 * Records the steps of a verification. Verifiers call `plan` once they know their path, `pass`
 * after each check; a failing check throws `Rejection(reason, detail)` with `check` set via `fail`.
 */
export interface Trace {
  /** the ordered check ids this path will run; unreached ones are reported as skipped */
  plan(ids: readonly CheckId[]): void;
  pass(id: CheckId, detail: string): void;
  skip(id: CheckId, detail: string): void;
  /** names the check that is about to fail; the Rejection thrown next is attributed to it */
  current(id: CheckId): void;
  /**
   * The allowlist entry's observe set, once the verifier has read the entry (each call replaces
   * the set). Until then every policy rule is enforced.
   */
  observe(codes: readonly string[]): void;
  /**
   * A policy rule failed. When the entry observes `reason`, the failure is recorded and this
   * returns (the verification goes on); otherwise it throws `Rejection(enforcedAs ?? reason,
   * detail)` attributed to `id`. The only place that chooses between the two.
   */
  policyFailed(
    id: CheckId,
    reason: ObservableReason,
    detail: string,
    enforcedAs?: RejectReason,
  ): void;
  facts: VerifyFacts;
}
