/**
 * The provisioning information extension (1.3.6.1.4.1.11129.2.1.30) that Google's remote key
 * provisioning writes into the attestation certificate it issues: a CBOR map with integer keys
 * (1: how many certificates the server has issued to this device, which Google's verifier names
 * `certificatesIssued`; real chains also carry 2 (a boolean) and 3 (the manufacturer, "Google")).
 * Google signs it, so it is shown as data; no rule reads it. Bounded before it is decoded: a
 * few bytes in real chains, at most MAX_PROVISIONING_INFO_BYTES, one level of small values.
 */
import { CborError, decodeStrictCbor, isMap } from '../cbor.js';
import { Rejection } from '../reasons.js';
import type { AndroidProvisioningInfo } from './androidKeyTokenDetails.js';

/** Real values are 3 to 14 bytes. */
export const MAX_PROVISIONING_INFO_BYTES = 512;
const MAX_ENTRIES = 16;
const MAX_TEXT = 64;

/**
 * Reads the extension's value (extnValue's content: the CBOR, as Google's verifier reads it). Throws
 * `Rejection('android_key_malformed')` on anything but a small map of integers to small values.
 * @param value the extension's extnValue content
 * @param what names the certificate in the rejection
 */
export function readProvisioningInfo(value: Uint8Array, what: string): AndroidProvisioningInfo {
  const fail = (detail: string): never => {
    throw new Rejection(
      'android_key_malformed',
      `${what}'s provisioning information (1.3.6.1.4.1.11129.2.1.30) ${detail}`,
    );
  };
  if (value.length > MAX_PROVISIONING_INFO_BYTES)
    fail(`is ${value.length} bytes: at most ${MAX_PROVISIONING_INFO_BYTES}`);
  let decoded: unknown;
  try {
    decoded = decodeStrictCbor(value, {
      maxDepth: 2,
      maxBytes: MAX_PROVISIONING_INFO_BYTES,
      maxItems: 1 + 2 * MAX_ENTRIES,
    });
  } catch (err) {
    if (err instanceof CborError) return fail(`is not strict CBOR (${err.message})`);
    throw err;
  }
  if (!isMap(decoded)) return fail('is not a CBOR map');
  const entries: AndroidProvisioningInfo['entries'] = {};
  for (const [key, v] of decoded) {
    if (typeof key !== 'number' || !Number.isSafeInteger(key))
      fail('has a key that is not an integer');
    if (typeof v === 'number' && Number.isSafeInteger(v)) entries[String(key)] = v;
    else if (typeof v === 'boolean') entries[String(key)] = v;
    else if (typeof v === 'string' && v.length <= MAX_TEXT) entries[String(key)] = v;
    else
      fail(`holds a value under ${key as number} that is not an integer, a boolean or short text`);
  }
  const issued = entries['1'];
  if (issued !== undefined && typeof issued !== 'number')
    fail('says certificatesIssued (1) with a value that is not an integer');
  return { ...(typeof issued === 'number' ? { certificatesIssued: issued } : {}), entries };
}
