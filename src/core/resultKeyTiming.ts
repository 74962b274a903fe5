/**
 * How long a retired key stays published beyond the token lifetime: a token signed the moment
 * before its key was retired still verifies until it expires, with an hour of slack for
 * verifiers' caches and clocks.
 */
export const RETIRED_KEY_GRACE_SECONDS = 3600;

/**
 * How long after a rotation the new key starts signing. Every instance re-reads the keys at
 * least every 5 s (its JWKS then has the new key); the extra second covers the time between the
 * database's clock at the insert and its commit. So no instance signs with a key that another
 * instance's JWKS does not have yet.
 */
export const ROTATION_DELAY_SECONDS = 6;
