import { isBytes, isMap } from '../cbor.js';
import { Rejection } from '../reasons.js';
import { MAX_CHAIN_LENGTH } from './attestationChain.js';

const KEY_ID_LENGTH = 32;
const MAX_CHAIN = MAX_CHAIN_LENGTH;
const MAX_PACKAGE_NAME = 256;

/** The `android-key` evidence map of a token, checked for shape only. */
export interface AndroidKeyEvidence {
  packageName: string;
  keyId: Uint8Array;
  certificateChain: Uint8Array[] | null;
  signature: Uint8Array | null;
}

/**
 * Reads the `android-key` map of a token. Throws `Rejection('token_malformed')` on a wrong type
 * or size, and when the map carries both or neither of `certificateChain` and `signature`.
 * @param evidence the decoded value under the token's `android-key` key
 */
export function readAndroidKeyEvidence(evidence: unknown): AndroidKeyEvidence {
  const bad = (detail: string): never => {
    throw new Rejection('token_malformed', detail);
  };
  if (!isMap(evidence)) bad('the "android-key" evidence is not a map');
  const map = evidence as Map<unknown, unknown>;
  const packageName = map.get('packageName');
  if (
    typeof packageName !== 'string' ||
    packageName.length === 0 ||
    packageName.length > MAX_PACKAGE_NAME
  )
    bad(`"android-key.packageName" must be text of 1 to ${MAX_PACKAGE_NAME} characters`);
  const keyId = map.get('keyId');
  if (!isBytes(keyId) || keyId.length !== KEY_ID_LENGTH)
    bad(`"android-key.keyId" must be a byte string of ${KEY_ID_LENGTH} bytes`);
  const chain = map.get('certificateChain');
  if (
    chain !== undefined &&
    (!Array.isArray(chain) ||
      chain.length < 1 ||
      chain.length > MAX_CHAIN ||
      !chain.every((c) => isBytes(c)))
  )
    bad(`"android-key.certificateChain" must be an array of 1 to ${MAX_CHAIN} byte strings`);
  const signature = map.get('signature');
  if (signature !== undefined && !isBytes(signature))
    bad('"android-key.signature" must be a byte string');
  if ((chain === undefined) === (signature === undefined))
    bad('"android-key" must carry exactly one of certificateChain and signature');
  return {
    packageName: packageName as string,
    keyId: keyId as Uint8Array,
    certificateChain: (chain as Uint8Array[] | undefined) ?? null,
    signature: (signature as Uint8Array | undefined) ?? null,
  };
}
