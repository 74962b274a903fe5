/**
 * Revocation, expiry and allowlist edits reach every instance within this time even when a
 * change notification is lost (on PostgreSQL they are announced and apply at once).
 */
export const PROPAGATION_MS = 5000;
