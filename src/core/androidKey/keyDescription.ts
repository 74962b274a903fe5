/**
 * The Android KeyDescription (extension 1.3.6.1.4.1.11129.2.1.17), decoded with asn1js against
 * the AOSP schema through attestation version 500. Real devices ship BER where DER is due
 * (BOOLEAN true as 0x01, SET OF out of order, AuthorizationList tags out of order): asn1js reads
 * BER, so those decode; every field this service reads is type-checked, unknown tags are skipped
 * (newer KeyMint versions add some), and anything else is `android_key_malformed`.
 */
import * as asn1js from 'asn1js';
import { Rejection } from '../reasons.js';
import type {
  AndroidBootState,
  AndroidKeyExtras,
  AndroidSecurityLevel,
} from './androidKeyTokenDetails.js';

/** The attestation extension's OID. */
export const KEY_DESCRIPTION_OID = '1.3.6.1.4.1.11129.2.1.17';

/**
 * asn1js options: a KeyDescription is a few levels deep and a few hundred nodes. OCTET and BIT
 * STRING contents are not tried as ASN.1 (asn1js's default): every one this service reads is
 * read from its bytes (an extension value, the attestationApplicationId), and trying them cost
 * a third of a certificate's decoding.
 */
export const ASN1_LIMITS = { maxDepth: 16, maxNodes: 4096, parseEmbedded: false } as const;

export interface RootOfTrust {
  verifiedBootKey: Uint8Array;
  deviceLocked: boolean;
  verifiedBootState: AndroidBootState;
  verifiedBootHash: Uint8Array | null;
}

export interface AttestationApplicationId {
  packages: { name: string; version: number }[];
  signatureDigests: Uint8Array[];
}

/** The facts of a KeyDescription this service uses. */
export interface KeyDescription {
  attestationVersion: number;
  attestationSecurityLevel: AndroidSecurityLevel;
  keyMintVersion: number;
  keyMintSecurityLevel: AndroidSecurityLevel;
  attestationChallenge: Uint8Array;
  /** from the hardware-enforced list only: a software-enforced root of trust proves nothing */
  rootOfTrust: RootOfTrust | null;
  /** YYYYMM from the hardware-enforced list, or null */
  osPatchLevel: number | null;
  /** from either list (Keystore fills it in; KeyMint 4 moved it to hardware-enforced) */
  applicationId: AttestationApplicationId | null;
  /** attested device IDs (hardware-enforced), as text: only for hints */
  deviceIds: { brand?: string; device?: string; product?: string; model?: string };
  /** KeyMint's origin of the key (hardware-enforced [702]): 0 generated in the secure hardware */
  origin: number | null;
  /** vendor and boot patch levels (hardware-enforced [718], [719]) as written: YYYYMMDD or YYYYMM */
  vendorPatchLevel: number | null;
  bootPatchLevel: number | null;
  /** the attestation version 500 tags and others shown as data, from either list */
  extras: KeyDescriptionExtras;
}

/** The authorization-list part of the extras (the chain adds the provisioning information). */
export type KeyDescriptionExtras = Omit<AndroidKeyExtras, 'provisioningInfo'>;

/** Unknown tags carried as data: more than this many is a hostile description, not a newer one. */
export const MAX_UNKNOWN_TAGS = 32;

const SECURITY_LEVELS: readonly AndroidSecurityLevel[] = [
  'Software',
  'TrustedEnvironment',
  'StrongBox',
];
const BOOT_STATES: readonly AndroidBootState[] = ['Verified', 'SelfSigned', 'Unverified', 'Failed'];

type Kind = 'int' | 'intSet' | 'null' | 'octets' | 'rootOfTrust';

/** AuthorizationList tags of the AOSP schema (attestation versions 1 to 500) and their types. */
const AUTHORIZATION_TAGS: ReadonlyMap<number, Kind> = new Map<number, Kind>([
  [1, 'intSet'], // purpose
  [2, 'int'], // algorithm
  [3, 'int'], // keySize
  [4, 'intSet'], // blockMode
  [5, 'intSet'], // digest
  [6, 'intSet'], // padding
  [7, 'null'], // callerNonce
  [8, 'int'], // minMacLength
  [10, 'int'], // ecCurve
  [11, 'int'], // mlDsaVariant (ML_DSA_VARIANT, v500)
  [200, 'int'], // rsaPublicExponent
  [203, 'intSet'], // mgfDigest
  [303, 'null'], // rollbackResistance
  [305, 'null'], // earlyBootOnly
  [400, 'int'], // activeDateTime
  [401, 'int'], // originationExpireDateTime
  [402, 'int'], // usageExpireDateTime
  [405, 'int'], // usageCountLimit
  [503, 'null'], // noAuthRequired
  [504, 'int'], // userAuthType
  [505, 'int'], // authTimeout
  [506, 'null'], // allowWhileOnBody
  [507, 'null'], // trustedUserPresenceRequired
  [508, 'null'], // trustedConfirmationRequired
  [509, 'null'], // unlockedDeviceRequired
  [600, 'null'], // allApplications
  [601, 'octets'], // applicationId
  [701, 'int'], // creationDateTime
  [702, 'int'], // origin
  [703, 'null'], // rollbackResistant
  [704, 'rootOfTrust'],
  [705, 'int'], // osVersion
  [706, 'int'], // osPatchLevel
  [709, 'octets'], // attestationApplicationId
  [710, 'octets'], // attestationIdBrand
  [711, 'octets'], // attestationIdDevice
  [712, 'octets'], // attestationIdProduct
  [713, 'octets'], // attestationIdSerial
  [714, 'octets'], // attestationIdImei
  [715, 'octets'], // attestationIdMeid
  [716, 'octets'], // attestationIdManufacturer
  [717, 'octets'], // attestationIdModel
  [718, 'int'], // vendorPatchLevel
  [719, 'int'], // bootPatchLevel
  [720, 'null'], // deviceUniqueAttestation
  [723, 'octets'], // attestationIdSecondImei
  [724, 'octets'], // moduleHash
]);

/** Attestation versions of the AOSP schema: Keymaster 1 to 4.1, KeyMint 1 to 5 (Android 17). */
export const KNOWN_ATTESTATION_VERSIONS: ReadonlySet<number> = new Set([
  1, 2, 3, 4, 100, 200, 300, 400, 500,
]);

function malformed(detail: string): never {
  throw new Rejection('android_key_malformed', `KeyDescription: ${detail}`);
}

/**
 * Decodes BER `bytes` as exactly one ASN.1 value (nothing after it), within `ASN1_LIMITS`.
 * @param what names the value in the rejection
 */
export function decodeOne(bytes: Uint8Array, what: string): asn1js.AsnType {
  const fail = (detail: string): never => {
    throw new Rejection('android_key_malformed', `${what} ${detail}`);
  };
  let parsed: ReturnType<typeof asn1js.fromBER>;
  try {
    parsed = asn1js.fromBER(bytes, ASN1_LIMITS);
  } catch {
    return fail('is not readable ASN.1');
  }
  if (parsed.offset === -1 || parsed.result.error)
    fail(`is not readable ASN.1 (${parsed.result.error || 'decode error'})`);
  if (parsed.offset !== bytes.length) fail('has bytes after its ASN.1 value');
  return parsed.result;
}

/** The elements of a constructed value. */
export const children = (v: asn1js.AsnType): asn1js.AsnType[] =>
  (v as asn1js.Sequence).valueBlock.value as asn1js.AsnType[];

function isUniversal(v: asn1js.AsnType, tag: number): boolean {
  return v.idBlock.tagClass === 1 && v.idBlock.tagNumber === tag;
}

/** A non-negative INTEGER (or ENUMERATED) of at most 53 bits. */
function integer(v: asn1js.AsnType | undefined, what: string, enumerated = false): number {
  // by tag: asn1js's Enumerated is a subclass of its Integer
  if (!v || !(v instanceof asn1js.Integer) || !isUniversal(v, enumerated ? 10 : 2))
    malformed(`${what} is not ${enumerated ? 'an ENUMERATED' : 'an INTEGER'}`);
  const bytes = (v as asn1js.Integer).valueBlock.valueHexView;
  if (bytes.length === 0) malformed(`${what} is empty`);
  if (bytes[0]! & 0x80) malformed(`${what} is negative`);
  let n = 0n;
  for (const b of bytes) n = (n << 8n) | BigInt(b);
  if (n > BigInt(Number.MAX_SAFE_INTEGER)) malformed(`${what} is out of range`);
  return Number(n);
}

function octets(v: asn1js.AsnType | undefined, what: string): Uint8Array {
  if (!v || !(v instanceof asn1js.OctetString) || v.idBlock.isConstructed)
    malformed(`${what} is not an OCTET STRING`);
  return new Uint8Array((v as asn1js.OctetString).valueBlock.valueHexView);
}

function boolean(v: asn1js.AsnType | undefined, what: string): boolean {
  if (!v || !(v instanceof asn1js.Boolean)) malformed(`${what} is not a BOOLEAN`);
  const bytes = (v as asn1js.Boolean).valueBlock.valueHexView;
  if (bytes.length !== 1) malformed(`${what} is not one byte`);
  // DER says 0xFF for true; devices write 0x01, which BER allows
  return bytes[0] !== 0;
}

function sequence(v: asn1js.AsnType | undefined, what: string): asn1js.AsnType[] {
  if (!v || !(v instanceof asn1js.Sequence)) malformed(`${what} is not a SEQUENCE`);
  return children(v);
}

function setOf(v: asn1js.AsnType | undefined, what: string): asn1js.AsnType[] {
  if (!v || !(v instanceof asn1js.Set)) malformed(`${what} is not a SET`);
  return children(v);
}

function level(v: asn1js.AsnType | undefined, what: string): AndroidSecurityLevel {
  const n = integer(v, what, true);
  return SECURITY_LEVELS[n] ?? malformed(`${what} ${n} is not a security level`);
}

function text(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('utf8');
}

/** One AuthorizationList: its tagged fields, type-checked, by tag number. */
function authorizationList(v: asn1js.AsnType | undefined, what: string, unknown: number[]) {
  const fields = new Map<number, asn1js.AsnType>();
  for (const field of sequence(v, what)) {
    const { tagClass, tagNumber, isConstructed } = field.idBlock;
    // every field is [n] EXPLICIT: a context-specific constructed wrapper around one value
    if (tagClass !== 3 || !isConstructed)
      malformed(`${what} holds a field that is not [n] EXPLICIT`);
    const inner = children(field);
    if (inner.length !== 1) malformed(`${what} [${tagNumber}] does not hold exactly one value`);
    if (fields.has(tagNumber)) malformed(`${what} holds [${tagNumber}] twice`);
    const value = inner[0]!;
    const kind = AUTHORIZATION_TAGS.get(tagNumber);
    const name = `${what} [${tagNumber}]`;
    switch (kind) {
      case 'int':
        integer(value, name);
        break;
      case 'intSet':
        for (const item of setOf(value, name)) integer(item, `${name} item`);
        break;
      case 'null':
        if (!isUniversal(value, 5)) malformed(`${name} is not NULL`);
        break;
      case 'octets':
        octets(value, name);
        break;
      case 'rootOfTrust':
        sequence(value, name);
        break;
      case undefined:
        // a tag of a later schema: carried as data (its number), its value not read
        if (unknown.length >= MAX_UNKNOWN_TAGS)
          malformed(`more than ${MAX_UNKNOWN_TAGS} tags this service does not know`);
        unknown.push(tagNumber);
        break;
    }
    fields.set(tagNumber, value);
  }
  return fields;
}

function rootOfTrust(v: asn1js.AsnType): RootOfTrust {
  const parts = sequence(v, 'rootOfTrust');
  if (parts.length < 3) malformed('rootOfTrust has fewer than 3 fields');
  const state = integer(parts[2], 'rootOfTrust.verifiedBootState', true);
  return {
    verifiedBootKey: octets(parts[0], 'rootOfTrust.verifiedBootKey'),
    deviceLocked: boolean(parts[1], 'rootOfTrust.deviceLocked'),
    verifiedBootState:
      BOOT_STATES[state] ?? malformed(`rootOfTrust.verifiedBootState ${state} is unknown`),
    // attestation version 3 and later
    verifiedBootHash: parts[3] ? octets(parts[3], 'rootOfTrust.verifiedBootHash') : null,
  };
}

function applicationId(bytes: Uint8Array): AttestationApplicationId {
  const what = 'attestationApplicationId';
  const parts = sequence(decodeOne(bytes, `KeyDescription: ${what}`), what);
  if (parts.length !== 2) malformed(`${what} does not have 2 fields`);
  const packages = setOf(parts[0], `${what}.packageInfos`).map((info) => {
    const fields = sequence(info, `${what} package`);
    if (fields.length !== 2) malformed(`${what} package does not have 2 fields`);
    return {
      name: text(octets(fields[0], `${what} package name`)),
      version: integer(fields[1], `${what} package version`),
    };
  });
  const signatureDigests = setOf(parts[1], `${what}.signatureDigests`).map((d) =>
    octets(d, `${what} signature digest`),
  );
  return { packages, signatureDigests };
}

/** [724] is a SHA-256 digest; room for a longer hash, no room for a payload. */
const MAX_MODULE_HASH_BYTES = 64;

/** A patch level as YYYYMM: KeyMint writes osPatchLevel so; a YYYYMMDD value is cut to its month. */
function patchMonth(n: number): number {
  return n > 999_999 ? Math.floor(n / 100) : n;
}

/**
 * Decodes a KeyDescription. Throws `Rejection('android_key_malformed')` on anything that does not
 * fit the schema; never anything else.
 * @param bytes the extension's value (the OCTET STRING's content)
 */
export function parseKeyDescription(bytes: Uint8Array): KeyDescription {
  const fields = sequence(decodeOne(bytes, 'KeyDescription'), 'KeyDescription');
  if (fields.length < 8) malformed(`${fields.length} fields, 8 expected`);
  octets(fields[5], 'uniqueId');
  const unknownTags: number[] = [];
  const software = authorizationList(fields[6], 'softwareEnforced', unknownTags);
  const hardware = authorizationList(fields[7], 'hardwareEnforced', unknownTags);
  // the hardware-enforced value where both lists carry a tag (KeyMint moves tags between them)
  const either = (tag: number) => hardware.get(tag) ?? software.get(tag);
  const extras: KeyDescriptionExtras = {};
  const mlDsa = either(11);
  if (mlDsa) extras.mlDsaVariant = integer(mlDsa, '[11] mlDsaVariant');
  const usage = either(405);
  if (usage) extras.usageCountLimit = integer(usage, '[405] usageCountLimit');
  if (either(508)) extras.trustedConfirmationRequired = true;
  const moduleHash = either(724);
  if (moduleHash) {
    const bytes = octets(moduleHash, '[724] moduleHash');
    if (bytes.length > MAX_MODULE_HASH_BYTES)
      malformed(
        `[724] moduleHash is ${bytes.length} bytes: a digest is at most ${MAX_MODULE_HASH_BYTES}`,
      );
    extras.moduleHash = Buffer.from(bytes).toString('base64');
  }
  if (unknownTags.length > 0) extras.unknownTags = unknownTags;
  const optionalInt = (tag: number, name: string) => {
    const value = hardware.get(tag);
    return value ? integer(value, name) : null;
  };
  const root = hardware.get(704);
  const patch = hardware.get(706);
  const appId = hardware.get(709) ?? software.get(709);
  const idText = (tag: number) => {
    const v = hardware.get(tag);
    return v ? text(octets(v, `[${tag}]`)) : undefined;
  };
  const deviceIds: KeyDescription['deviceIds'] = {};
  for (const [key, tag] of [
    ['brand', 710],
    ['device', 711],
    ['product', 712],
    ['model', 717],
  ] as const) {
    const value = idText(tag);
    if (value !== undefined) deviceIds[key] = value;
  }
  return {
    attestationVersion: integer(fields[0], 'attestationVersion'),
    attestationSecurityLevel: level(fields[1], 'attestationSecurityLevel'),
    keyMintVersion: integer(fields[2], 'keyMintVersion'),
    keyMintSecurityLevel: level(fields[3], 'keyMintSecurityLevel'),
    attestationChallenge: octets(fields[4], 'attestationChallenge'),
    rootOfTrust: root ? rootOfTrust(root) : null,
    osPatchLevel: patch ? patchMonth(integer(patch, 'osPatchLevel')) : null,
    applicationId: appId ? applicationId(octets(appId, 'attestationApplicationId')) : null,
    deviceIds,
    origin: optionalInt(702, '[702] origin'),
    vendorPatchLevel: optionalInt(718, '[718] vendorPatchLevel'),
    bootPatchLevel: optionalInt(719, '[719] bootPatchLevel'),
    extras,
  };
}
