/**
 * The claims of a result token, exactly these and in this order (docs/result-tokens.md): what the
 * service signs (core/resultToken.ts) and what the client's verifyResultToken returns. Types only,
 * so the client package ships it without any server code.
 */
export interface ResultTokenClaims {
  /** the deployment (ATTEST_ISSUER) */
  iss: string;
  /** the id of the API key whose verify made the token */
  aud: string;
  /** keyIdentifier (App Attest, Android key attestation) or packageName (Play Integrity) */
  sub: string;
  iat: number;
  exp: number;
  jti: string;
  service: string;
  approach: 'session' | 'sessionless';
  /** base64url of SHA-256 of the final nonce */
  nonce: string;
  /** the details object of the verify response */
  details: Record<string, unknown>;
  /**
   * RFC 7800: the device's own public key, for App Attest and Android key attestation results
   * (never Play Integrity); the client's `verifyPossession` checks a signature by it
   */
  cnf?: DeviceKeyConfirmation;
  /**
   * only on the tokens of test-mode API keys (always `true`): the evidence may have been minted
   * with the development CA, so the token proves nothing about a device
   */
  test?: true;
}

/** A result token's `cnf`: the device key as a JWK of the members RFC 7638 thumbprints. */
export interface DeviceKeyConfirmation {
  jwk: DeviceJwk;
}

/** The public members of a device key's JWK: EC P-256 (App Attest, most Android keys) or RSA. */
export type DeviceJwk =
  { kty: 'EC'; crv: string; x: string; y: string } | { kty: 'RSA'; n: string; e: string };
