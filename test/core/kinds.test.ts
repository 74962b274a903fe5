/**
 * The kind registry (src/core/kinds.ts): each descriptor agrees with itself, the lists derived
 * from it hold every kind's part, and the CLI's registry (its adapter) names the same services.
 */
import { describe, expect, it } from 'vitest';
import { KINDS as CLI_KINDS } from '../../src/cli/kinds/registry.js';
import { CHECK_TITLES } from '../../src/core/checkTitles.js';
import { DETAILS_SCHEMAS } from '../../src/core/detailsSchemas.js';
import { KINDS } from '../../src/core/kinds.js';
import { OBSERVABLE_REASONS } from '../../src/core/observedRules.js';
import { REJECT_REASONS } from '../../src/core/rejectReasons.js';
import { DEVICE_KEY_SERVICES, SERVICES } from '../../src/core/services.js';

describe('the kind registry', () => {
  it('the CLI registry names the same services, in the same order', () => {
    expect(CLI_KINDS.map((k) => k.service)).toEqual(KINDS.map((k) => k.service));
  });

  it.each(KINDS.map((k) => [k.service, k] as const))('%s agrees with itself', (_, kind) => {
    expect(kind.detailsSchema.responseField).toBe(kind.detailsField);
    // a kind's own reasons are no one else's, and it observes only reasons that exist
    for (const other of KINDS.filter((k) => k !== kind))
      for (const reason of kind.reasons) expect(other.reasons).not.toContain(reason);
    for (const code of kind.observable) expect(REJECT_REASONS).toContain(code);
    for (const id of Object.keys(kind.checkTitles)) expect(CHECK_TITLES).toHaveProperty([id]);
  });

  it('every derived list holds every kind', () => {
    expect(SERVICES).toEqual(KINDS.map((k) => k.service));
    expect(Object.keys(OBSERVABLE_REASONS)).toEqual([...SERVICES]);
    expect(DETAILS_SCHEMAS.map((d) => d.responseField)).toEqual(KINDS.map((k) => k.detailsField));
    expect(new Set(REJECT_REASONS).size).toBe(REJECT_REASONS.length);
    for (const kind of KINDS) for (const r of kind.reasons) expect(REJECT_REASONS).toContain(r);
    expect(DEVICE_KEY_SERVICES).toEqual(['apple', 'android-key']);
  });
});
