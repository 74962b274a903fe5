/**
 * Why a verify was rejected, only for API keys made with `--rejection-details`: the reason code
 * (docs/checks.md), and for a Play cause the user can fix on the device the Play dialog the app
 * can show (its name, and the type code to pass to `showDialog`).
 */
export interface Rejection {
  reason: string;
  remediation?: { dialog: string; typeCode: number };
}

/** The rejected answer, with the rejection when the service gave one. */
export function rejected(rejection: Rejection | undefined): {
  isValid: false;
  statusCode: 0;
  rejection?: Rejection;
} {
  return rejection === undefined
    ? { isValid: false, statusCode: 0 }
    : { isValid: false, statusCode: 0, rejection };
}
