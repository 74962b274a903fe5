/**
 * The client's response shapes held against the service's own /openapi.json: the same required
 * fields, the same properties, and for each the same type, enum, constant or minimum. A field the
 * service adds, drops or retypes fails here before a client misreads it.
 */
import { beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import {
  ANDROID_KEY_DETAILS,
  APPLE_TOKEN_DETAILS,
  CONSUME_RESPONSE,
  RESULT_TOKEN_CLAIMS,
  DEVICE_RECALL_RESPONSE,
  ERROR_BODY,
  GOOGLE_TOKEN_DETAILS,
  HTTP_ERROR_KINDS,
  INIT_RESPONSE,
  VERIFY_RESPONSE,
  type AndroidKeyDetails,
  type AppleTokenDetails,
  type AttestSession,
  type GoogleTokenDetails,
  type Shape,
} from '../../src/client/index.js';
import * as detailsShapes from '../../src/client/detailsShapes.js';
import { REJECTION, REMEDIATION, type FieldType } from '../../src/client/shapes.js';
import { backends } from '../support/databases.js';
import { BASE, createTestService } from '../support/service.js';

type Schema = Record<string, unknown> & {
  $ref?: string;
  required?: string[];
  properties?: Record<string, Schema>;
};
interface Doc {
  components: { schemas: Record<string, Schema> };
  paths: Record<
    string,
    {
      post: { responses: Record<string, { content?: { 'application/json': { schema: Schema } } }> };
    }
  >;
}

let doc: Doc;
beforeAll(async () => {
  // /openapi.json reads no database
  const db = await backends()[0]!.open();
  const res = await createTestService(db).app.request(`${BASE}/openapi.json`);
  expect(res.status).toBe(200);
  doc = (await res.json()) as Doc;
  await db.close();
});

const resolve = (schema: Schema): Schema =>
  schema.$ref ? doc.components.schemas[schema.$ref.replace('#/components/schemas/', '')]! : schema;
const responseSchema = (path: string, status: string) =>
  resolve(doc.paths[path]!.post.responses[status]!.content!['application/json'].schema);

/** The client's field type for an OpenAPI property schema (what it must be, given the document). */
function expectedType(schema: Schema, shapes: Record<string, Shape>): FieldType {
  if (schema.$ref) return { object: shapes[schema.$ref.replace('#/components/schemas/', '')]! };
  if ('const' in schema) return { const: schema.const as number };
  if (schema.enum) return { enum: schema.enum as string[] };
  if (schema.type === 'array') {
    const item = (schema.items as Schema).type;
    expect(['string', 'integer']).toContain(item);
    return { type: item === 'integer' ? 'integer[]' : 'string[]' };
  }
  if (schema.type === 'object' && schema.additionalProperties) return { type: 'record' };
  if (Array.isArray(schema.type)) {
    expect(schema.type).toEqual(['integer', 'null']);
    return { type: 'integer', nullable: true };
  }
  if (schema.type === 'integer')
    return schema.minimum === undefined
      ? { type: 'integer' }
      : { type: 'integer', minimum: schema.minimum as number };
  return { type: schema.type as 'string' | 'boolean' };
}

function expectSameShape(shape: Shape, schema: Schema, shapes: Record<string, Shape> = {}) {
  expect([...shape.required].sort()).toEqual([...schema.required!].sort());
  expect(Object.keys(shape.properties).sort()).toEqual(Object.keys(schema.properties!).sort());
  for (const [name, property] of Object.entries(schema.properties!)) {
    expect({ name, type: shape.properties[name] }).toEqual({
      name,
      type: expectedType(property, shapes),
    });
  }
}

describe('client shapes against /openapi.json', () => {
  // every kind's shapes, generated from its schema: each held against the document's component
  const generated: Record<string, Shape> = Object.fromEntries(
    (Object.values(detailsShapes) as unknown[])
      .filter((v): v is Shape => typeof v === 'object' && v !== null && 'properties' in v)
      .map((shape) => [shape.name, shape]),
  );
  const details = { ...generated, Rejection: REJECTION };

  it('init 200', () =>
    expectSameShape(INIT_RESPONSE, responseSchema('/api/v1/attestation/init', '200')));
  it("verify 200, with every kind's details object", () => {
    expectSameShape(VERIFY_RESPONSE, responseSchema('/api/v1/attestation/verify', '200'), details);
    expect(Object.keys(generated)).toEqual(
      expect.arrayContaining(['AppleTokenDetails', 'GoogleTokenDetails', 'DeviceRecall']),
    );
    for (const shape of Object.values(generated))
      expectSameShape(shape, doc.components.schemas[shape.name]!, generated);
    expectSameShape(REJECTION, doc.components.schemas.Rejection!, { Remediation: REMEDIATION });
    expectSameShape(REMEDIATION, doc.components.schemas.Remediation!);
  });
  it('consume 200, with the claims of a result token', () => {
    const claims = {
      ResultTokenClaims: RESULT_TOKEN_CLAIMS,
      ResultTokenDetails: RESULT_TOKEN_CLAIMS.properties.details.object,
      ResultTokenConfirmation: RESULT_TOKEN_CLAIMS.properties.cnf.object,
    };
    expectSameShape(CONSUME_RESPONSE, responseSchema('/api/v1/results/consume', '200'), claims);
    expectSameShape(RESULT_TOKEN_CLAIMS, doc.components.schemas.ResultTokenClaims!, claims);
    expectSameShape(claims.ResultTokenDetails, doc.components.schemas.ResultTokenDetails!);
  });
  it('device-recall 200', () =>
    expectSameShape(
      DEVICE_RECALL_RESPONSE,
      responseSchema('/api/v1/android/device-recall', '200'),
    ));
  it('every error body the document describes is the one the client reads', () => {
    const withBody = Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.entries(item.post.responses)
        .filter(([status, r]) => status !== '200' && r.content)
        .map(([status]) => `${path} ${status}`),
    );
    expect(withBody.length).toBeGreaterThanOrEqual(6);
    for (const entry of withBody) {
      const [path, status] = entry.split(' ') as [string, string];
      expectSameShape(ERROR_BODY, responseSchema(path, status));
    }
  });
  it('every error status the document lists has its own kind in the client', () => {
    const statuses = new Set(
      Object.values(doc.paths).flatMap((item) => Object.keys(item.post.responses)),
    );
    statuses.delete('200');
    expect([...statuses].sort()).toEqual(Object.keys(HTTP_ERROR_KINDS).sort());
  });

  it("the client's TypeScript types are the shapes' (checked by tsc)", () => {
    type Props<S extends Shape> = keyof S['properties'];
    type RequiredKeys<T> = { [K in keyof T]-?: object extends Pick<T, K> ? never : K }[keyof T];
    expectTypeOf<keyof AppleTokenDetails>().toEqualTypeOf<Props<typeof APPLE_TOKEN_DETAILS>>();
    expectTypeOf<RequiredKeys<AppleTokenDetails>>().toEqualTypeOf<
      (typeof APPLE_TOKEN_DETAILS)['required'][number]
    >();
    expectTypeOf<AppleTokenDetails['environment']>().toEqualTypeOf<
      (typeof APPLE_TOKEN_DETAILS)['properties']['environment']['enum'][number]
    >();
    expectTypeOf<keyof GoogleTokenDetails>().toEqualTypeOf<Props<typeof GOOGLE_TOKEN_DETAILS>>();
    expectTypeOf<RequiredKeys<GoogleTokenDetails>>().toEqualTypeOf<
      (typeof GOOGLE_TOKEN_DETAILS)['required'][number]
    >();
    expectTypeOf<keyof AndroidKeyDetails>().toEqualTypeOf<Props<typeof ANDROID_KEY_DETAILS>>();
    expectTypeOf<RequiredKeys<AndroidKeyDetails>>().toEqualTypeOf<
      (typeof ANDROID_KEY_DETAILS)['required'][number]
    >();
    expectTypeOf<keyof AttestSession>().toEqualTypeOf<Props<typeof INIT_RESPONSE>>();
    expectTypeOf<RequiredKeys<AttestSession>>().toEqualTypeOf<
      (typeof INIT_RESPONSE)['required'][number]
    >();
    expectTypeOf<AttestSession['statusCode']>().toEqualTypeOf<
      (typeof INIT_RESPONSE)['properties']['statusCode']['const']
    >();
  });
});
