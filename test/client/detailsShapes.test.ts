/**
 * The client's details shapes are generated from the kinds' schemas (src/buildClientShapes.ts,
 * run by `npm run build`): the committed file is what the generator writes today, and it names
 * every kind of the registry, so a kind added or a schema changed cannot leave the client behind.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { formattedClientShapes } from '../../src/buildClientShapes.js';
import {
  CLIENT_SHAPES_FILE,
  clientShapesSource,
  constantName,
} from '../../src/clientShapesSource.js';
import { DETAILS_FIELDS } from '../../src/client/detailsShapes.js';
import { KINDS } from '../../src/core/kinds.js';
import type { AnyKind } from '../../src/core/kind.js';

describe('generated client shapes', () => {
  it('the committed file is what the build writes from the schemas', async () => {
    expect(readFileSync(CLIENT_SHAPES_FILE, 'utf8')).toBe(await formattedClientShapes());
  });

  it('names every kind with its details field, in the registry order', () => {
    expect(DETAILS_FIELDS.map(([service, field, shape]) => [service, field, shape.name])).toEqual(
      KINDS.map((k) => [k.service, k.detailsField, k.detailsSchema.main]),
    );
  });

  it('a schema form the client cannot check stops the build with the field named', () => {
    const odd: AnyKind = {
      ...(KINDS[0] as AnyKind),
      detailsSchema: {
        responseField: 'oddDetails',
        main: 'OddDetails',
        components: { OddDetails: { type: 'object', properties: { when: { type: 'number' } } } },
      },
    };
    expect(() => clientShapesSource([odd], { OddDetails: 'core/odd.ts' })).toThrow(
      /OddDetails\.when: the client has no shape/,
    );
    expect(() => clientShapesSource([odd], {})).toThrow(/no module declares the type OddDetails/);
  });

  it('a reference to an undeclared component stops the build', () => {
    const dangling: AnyKind = {
      ...(KINDS[0] as AnyKind),
      detailsSchema: {
        responseField: 'oddDetails',
        main: 'OddDetails',
        components: {
          OddDetails: {
            type: 'object',
            properties: { inner: { $ref: '#/components/schemas/Gone' } },
          },
        },
      },
    };
    expect(() => clientShapesSource([dangling], { OddDetails: 'core/odd.ts' })).toThrow(
      /refers to Gone, which it does not declare/,
    );
  });

  it('constant names follow the component names', () => {
    expect(constantName('GooglePcTokenDetails')).toBe('GOOGLE_PC_TOKEN_DETAILS');
    expect(constantName('DeviceRecallWriteDates')).toBe('DEVICE_RECALL_WRITE_DATES');
  });
});
