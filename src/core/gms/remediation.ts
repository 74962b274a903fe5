/**
 * Play Integrity's remediation dialogs: for some failed verdicts the app can show a Google Play
 * dialog (`showDialog(activity, typeCode)` on the token response) that lets the user fix the
 * cause on the device, then ask for a new token. The server says which dialog, by name and type
 * code, to API keys made with `--rejection-details` (docs/device-integration.md).
 *
 * The type codes are Google's IntegrityDialogTypeCode constants
 * (com.google.android.play.core.integrity.model.IntegrityDialogTypeCode in the Play Integrity
 * library: GET_LICENSED = 1, CLOSE_UNKNOWN_ACCESS_RISK = 2, CLOSE_ALL_ACCESS_RISK = 3,
 * GET_INTEGRITY = 4, GET_STRONG_INTEGRITY = 5). Google's "Remediation" page
 * (developer.android.com/google/play/integrity/remediation, "GET_LICENSED (Type Code 1)" and so
 * on) gives the verdict each of the first three fixes: GET_LICENSED appLicensingVerdict
 * UNLICENSED; CLOSE_UNKNOWN_ACCESS_RISK appsDetected holding UNKNOWN_CAPTURING or
 * UNKNOWN_CONTROLLING; CLOSE_ALL_ACCESS_RISK any of KNOWN_ or UNKNOWN_ CAPTURING or CONTROLLING.
 * GET_INTEGRITY and GET_STRONG_INTEGRITY are Play's guided fix of the device and app integrity
 * verdicts (and of network and Play Store errors on the device); the strong one where the package
 * requires MEETS_STRONG_INTEGRITY.
 */
import type { CheckId } from '../checkTitles.js';
import type { ObservableReason } from '../observedRules.js';
import type { AndroidPackagePolicy } from '../ports.js';
import type { RemediationDialog } from './gmsTokenDetails.js';
import type { Trace } from '../outcome.js';
import type { PlayIntegrityPayload } from './playIntegrityPayload.js';

/** The dialogs and their type codes (Google's IntegrityDialogTypeCode). */
export const REMEDIATION_DIALOGS = {
  GET_LICENSED: 1,
  CLOSE_UNKNOWN_ACCESS_RISK: 2,
  CLOSE_ALL_ACCESS_RISK: 3,
  GET_INTEGRITY: 4,
  GET_STRONG_INTEGRITY: 5,
} as const;
export type RemediationDialogName = keyof typeof REMEDIATION_DIALOGS;

function dialog(name: RemediationDialogName): RemediationDialog {
  return { dialog: name, typeCode: REMEDIATION_DIALOGS[name] };
}

/** The apps a CLOSE_ dialog closes: those that capture the screen or control the device. */
const CLOSABLE = ['CAPTURING', 'CONTROLLING'];

/**
 * The dialog that lets the user fix a failed Play rule on the device, or undefined when none does
 * (a rule of the app's own policy the user cannot change, or a verdict Google did not evaluate).
 * @param reason the rule that failed
 * @param payload the verdict it failed on
 * @param policy the package entry
 */
export function remediationFor(
  reason: ObservableReason,
  payload: PlayIntegrityPayload,
  policy: AndroidPackagePolicy,
): RemediationDialog | undefined {
  const strong = policy.minVerdict === 'MEETS_STRONG_INTEGRITY';
  switch (reason) {
    case 'gms_integrity_insufficient':
    case 'gms_app_not_recognized':
      return dialog(strong ? 'GET_STRONG_INTEGRITY' : 'GET_INTEGRITY');
    case 'gms_not_licensed':
      return payload.accountDetails?.appLicensingVerdict === 'UNLICENSED'
        ? dialog('GET_LICENSED')
        : undefined;
    case 'gms_app_access_risk': {
      const denied = policy.denyAppAccessRisk ?? [];
      const hit = (payload.environmentDetails?.appAccessRiskVerdict?.appsDetected ?? []).filter(
        (d) => denied.includes(d),
      );
      const closable = (prefix: string) =>
        hit.some((d) => CLOSABLE.some((kind) => d === `${prefix}_${kind}`));
      if (closable('KNOWN')) return dialog('CLOSE_ALL_ACCESS_RISK');
      if (closable('UNKNOWN')) return dialog('CLOSE_UNKNOWN_ACCESS_RISK');
      return undefined;
    }
    default:
      return undefined;
  }
}

/**
 * A Play rule failed: `trace.policyFailed`, with the rule's dialog in the facts while the
 * rejection stands (an observed failure goes on and leaves none behind).
 */
export function playRuleFailed(
  trace: Trace,
  id: CheckId,
  reason: ObservableReason,
  detail: string,
  remedy: RemediationDialog | undefined,
): void {
  if (remedy) trace.facts.remediation = remedy;
  trace.policyFailed(id, reason, detail);
  delete trace.facts.remediation;
}
