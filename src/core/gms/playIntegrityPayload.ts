import { z } from 'zod';

/** `appRecognitionVerdict` values that come with the app's identity (packageName, digests, version). */
const EVALUATED = new Set(['PLAY_RECOGNIZED', 'UNRECOGNIZED_VERSION']);

/**
 * `timestampMillis` is a decimal string in real payloads (a JSON int64); a plain number is
 * accepted too. At most 15 digits keeps it a safe integer.
 */
const timestampMillis = z
  .union([
    z.string().regex(/^\d{1,15}$/, 'expected a decimal string of milliseconds'),
    z.number().int().nonnegative(),
  ])
  .transform((v) => Number(v))
  .refine((v) => Number.isSafeInteger(v), 'expected a safe integer of milliseconds');

/** Google's JSON int64 and int32 fields come as numbers or decimal strings. */
const intText = z.union([
  z.string().regex(/^-?\d{1,15}$/, 'expected a decimal integer'),
  z.number().int(),
]);

/**
 * A device recall write month, YYYYMM in UTC (e.g. 202402); Google's int32 may come as text.
 */
const yyyymm = intText
  .transform(Number)
  .refine((v) => v >= 200001 && v <= 999912 && v % 100 >= 1 && v % 100 <= 12, {
    message: 'expected a month as YYYYMM',
  });

/**
 * `deviceIntegrity.deviceRecall` (Google's DeviceRecall: `values`, `writeDates`). A bit Google
 * leaves out is false (proto3 JSON drops false booleans); a bit of another type, or a write date
 * that is not a month, is a malformed verdict, never a guess.
 */
const deviceRecall = z.object({
  values: z.object({
    bitFirst: z.boolean().default(false),
    bitSecond: z.boolean().default(false),
    bitThird: z.boolean().default(false),
  }),
  writeDates: z
    .object({
      yyyymmFirst: yyyymm.optional(),
      yyyymmSecond: yyyymm.optional(),
      yyyymmThird: yyyymm.optional(),
    })
    .optional(),
});

/**
 * A value of one of Google's verdict enums in the newer structures: text, bounded before it is
 * read. A value this version does not know is kept and shown (Google adds values); only a value
 * that is not text, empty or longer than 64 is a malformed verdict.
 */
const enumText = z.string().min(1).max(64);
/** A list of such values: at most 16 (Google's longest list, appsDetected, has 8 values). */
const enumList = z.array(enumText).max(16);

/**
 * The Play Integrity verdict layout (Google, "Integrity verdicts"), as far as the checks read it,
 * for classic requests (`requestDetails.nonce`) and standard ones (`requestDetails.requestHash`).
 * Unknown members are dropped, not refused: Google adds fields
 * over time. The newer verdicts are optional: they appear only when opted in and evaluated.
 */
export const playIntegrityPayloadSchema = z.object({
  requestDetails: z
    .object({
      requestPackageName: z.string(),
      nonce: z.string().optional(),
      requestHash: z.string().optional(),
      timestampMillis,
    })
    .refine((r) => r.nonce !== undefined || r.requestHash !== undefined, {
      message: 'expected nonce (classic request) or requestHash (standard request)',
    }),
  appIntegrity: z
    .object({
      appRecognitionVerdict: z.string(),
      packageName: z.string().optional(),
      certificateSha256Digest: z.array(z.string()).optional(),
      versionCode: z.union([z.string(), z.number()]).transform(String).optional(),
    })
    // Google sends the app's identity with every evaluated verdict; a recognized verdict without
    // it would let the package decision rest on the spoofable requestPackageName alone.
    .refine(
      (a) =>
        !EVALUATED.has(a.appRecognitionVerdict) ||
        (a.packageName !== undefined && a.certificateSha256Digest !== undefined),
      {
        message:
          'an evaluated appRecognitionVerdict must come with packageName and certificateSha256Digest',
      },
    ),
  deviceIntegrity: z.object({
    deviceRecognitionVerdict: z.array(z.string()).optional(),
    deviceAttributes: z.object({ sdkVersion: intText.transform(Number).optional() }).optional(),
    recentDeviceActivity: z.object({ deviceActivityLevel: z.string().optional() }).optional(),
    deviceRecall: deviceRecall.optional(),
    // the device verdict under the old rules, sent during Google's transition to the new ones
    legacyDeviceRecognitionVerdict: enumList.optional(),
  }),
  accountDetails: z
    .object({
      appLicensingVerdict: z.string().optional(),
      accountActivity: z.object({ activityLevel: enumText.optional() }).optional(),
    })
    .optional(),
  environmentDetails: z
    .object({
      playProtectVerdict: z.string().optional(),
      appAccessRiskVerdict: z.object({ appsDetected: z.array(z.string()).optional() }).optional(),
      // a list in Google's client libraries; a lone value is read as a list of one
      locationSpoofingRiskVerdict: z.union([enumList, enumText.transform((v) => [v])]).optional(),
    })
    .optional(),
});

/** A payload that passed `playIntegrityPayloadSchema` (timestampMillis already a number). */
export type PlayIntegrityPayload = z.output<typeof playIntegrityPayloadSchema>;

/** One decoder for every payload: `decode` keeps no state between whole (non-streaming) calls. */
const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Parses the JWS payload bytes as a Play Integrity verdict.
 * @param bytes the verified JWS payload
 * @returns the payload, or a short plain-words problem
 */
export function parsePlayIntegrityPayload(bytes: Uint8Array): ParsedPayload {
  let json: unknown;
  try {
    json = JSON.parse(utf8.decode(bytes));
  } catch {
    return { ok: false, problem: 'the signed payload is not JSON' };
  }
  return parsePlayIntegrityJson(json);
}

type ParsedPayload = { ok: true; payload: PlayIntegrityPayload } | { ok: false; problem: string };

/**
 * Checks an already parsed verdict (what Google's decodeIntegrityToken returns as
 * `tokenPayloadExternal`) against the layout.
 * @param json the verdict object
 */
export function parsePlayIntegrityJson(json: unknown): ParsedPayload {
  const parsed = playIntegrityPayloadSchema.safeParse(json);
  if (parsed.success) return { ok: true, payload: parsed.data };
  const issue = parsed.error.issues[0];
  const where = issue && issue.path.length > 0 ? issue.path.join('.') : 'payload';
  return {
    ok: false,
    problem: `not the Play Integrity verdict layout: ${where}: ${issue?.message ?? 'invalid'}`,
  };
}
