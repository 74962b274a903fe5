// The PC verdict the suite mints (and the fake Google answers) against Google's discovery document
// excerpt in test/fixtures/google-pc: every field it sends is one the document defines, with the
// document's type, and every required field is there.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { mintPcPayload } from '../../src/core/gmsPc/pcMint.js';
import { parsePcIntegrityPayload } from '../../src/core/gmsPc/pcPayload.js';

interface Prop {
  $ref?: string;
  type?: string;
  format?: string;
  items?: { type: string };
  description?: string;
}
const doc = JSON.parse(
  readFileSync(new URL('../fixtures/google-pc/discovery-excerpt.json', import.meta.url), 'utf8'),
) as {
  resources: { v1: { methods: Record<string, { path: string; request: { $ref: string } }> } };
  schemas: Record<string, { properties: Record<string, Prop> }>;
};

/** the problems of `value` against schema `name`: unknown fields, wrong types, missing required */
function problems(value: Record<string, unknown>, name: string, at = name): string[] {
  const schema = doc.schemas[name]!;
  const out: string[] = [];
  for (const [key, prop] of Object.entries(schema.properties))
    if (prop.description?.startsWith('Required.') && !(key in value))
      out.push(`${at}.${key} is required`);
  for (const [key, v] of Object.entries(value)) {
    const prop = schema.properties[key];
    if (!prop) out.push(`${at}.${key} is not in the document`);
    else if (prop.$ref)
      out.push(...problems(v as Record<string, unknown>, prop.$ref, `${at}.${key}`));
    else if (prop.type === 'array') {
      if (!Array.isArray(v) || !v.every((x) => typeof x === prop.items!.type))
        out.push(`${at}.${key} is not an array of ${prop.items!.type}`);
    } else if (typeof v !== prop.type) out.push(`${at}.${key} is not a ${prop.type}`);
    else if (prop.format === 'google-datetime' && Number.isNaN(Date.parse(v as string)))
      out.push(`${at}.${key} is not an RFC 3339 time`);
  }
  return out;
}

describe("the minted PC verdict has the discovery document's shape", () => {
  const base = {
    packageName: 'com.example.game',
    nonce: new Uint8Array(32),
    requestTime: new Date('2026-11-22T12:00:00Z'),
  };

  it.each([
    ['every section', { ...base, isTestingResponse: true }],
    ['only the required sections', { ...base, appLicensingVerdict: null }],
  ] as const)('%s', (_name, options) => {
    const payload = mintPcPayload(options);
    expect(problems(payload, 'PcTokenPayloadExternal')).toEqual([]);
    expect(parsePcIntegrityPayload(payload)).toMatchObject({ ok: true });
  });

  it('the check can fail: a field of the standard verdict is not a PC field', () => {
    const payload = mintPcPayload(base);
    (payload.requestDetails as Record<string, unknown>).timestampMillis = '1';
    delete (payload as Record<string, unknown>).deviceIntegrity;
    expect(problems(payload, 'PcTokenPayloadExternal')).toEqual([
      'PcTokenPayloadExternal.deviceIntegrity is required',
      'PcTokenPayloadExternal.requestDetails.timestampMillis is not in the document',
    ]);
  });

  it('the method path and request field are the ones the client and the fake use', () => {
    const method = doc.resources.v1.methods.decodePcIntegrityToken!;
    expect(method.path).toBe('v1/{+packageName}:decodePcIntegrityToken');
    expect(Object.keys(doc.schemas[method.request.$ref]!.properties)).toEqual(['integrityToken']);
    const client = readFileSync(
      new URL('../../src/upstream/playIntegrityClient.ts', import.meta.url),
      'utf8',
    );
    expect(client).toContain(
      "method === 'decodePcIntegrityToken'\n            ? { integrityToken }",
    );
  });
});

describe('the PC payload parser bounds what it reads', () => {
  const ok = mintPcPayload({
    packageName: 'com.example.game',
    nonce: new Uint8Array(32),
    requestTime: new Date('2026-11-22T12:00:00Z'),
  });
  it.each([
    ['not an object', []],
    [
      'too many fields',
      { ...ok, ...Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`f${i}`, 1])) },
    ],
    [
      'a package name past 255',
      {
        ...ok,
        requestDetails: { ...(ok.requestDetails as object), requestPackageName: 'a'.repeat(256) },
      },
    ],
    [
      'a request hash past 500',
      { ...ok, requestDetails: { ...(ok.requestDetails as object), requestHash: 'a'.repeat(501) } },
    ],
    [
      'a time past 40',
      {
        ...ok,
        requestDetails: {
          ...(ok.requestDetails as object),
          requestTime: `2026-11-22T12:00:00.${'1'.repeat(40)}Z`,
        },
      },
    ],
    [
      'a licensing label past 64',
      { ...ok, accountDetails: { appLicensingVerdict: 'L'.repeat(65) } },
    ],
    ['accountDetails a list', { ...ok, accountDetails: [] }],
  ])('%s is refused', (_name, raw) => {
    expect(parsePcIntegrityPayload(raw)).toMatchObject({ ok: false });
  });
  it('unknown fields and labels are carried, not refused', () => {
    const parsed = parsePcIntegrityPayload({
      ...ok,
      newSection: { deep: { deeper: [1] } },
      deviceIntegrity: { deviceRecognitionVerdict: ['MEETS_PC_INTEGRITY', 'NEW_LABEL'], other: 1 },
    });
    expect(parsed).toMatchObject({
      ok: true,
      payload: { deviceRecognitionVerdict: ['MEETS_PC_INTEGRITY', 'NEW_LABEL'] },
    });
  });
});
