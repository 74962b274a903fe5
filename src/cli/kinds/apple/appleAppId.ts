/**
 * `TEAMID.bundle.id`: a 10-character team ID, a dot, a bundle ID. `_` is allowed in the bundle
 * part: Apple's own sample attestations (0352187391.com.apple.example_app_attest) carry one.
 */
export const APPLE_APP_ID = /^[A-Z0-9]{10}\.[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;
