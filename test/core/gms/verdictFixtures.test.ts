/** Google's documented verdict examples (test/fixtures/google) all parse, field by field. */
import { describe, expect, it } from 'vitest';
import {
  parsePlayIntegrityJson,
  parsePlayIntegrityPayload,
} from '../../../src/core/gms/playIntegrityPayload.js';
import { verdictFixtures } from '../../support/standardPayload.js';

const fixtures = verdictFixtures();

describe("Google's example verdicts", () => {
  it('are all here', () => {
    expect(Object.keys(fixtures).sort()).toEqual(
      [
        'classic-request',
        'emulator',
        'numeric-forms',
        'optional-labels',
        'seconds-sized-timestamp',
        'standard-request',
        'unevaluated-everything',
        'unlicensed-and-risky',
      ].sort(),
    );
  });

  it.each(Object.keys(fixtures))('%s parses, as an object and as JWS payload bytes', (name) => {
    const parsed = parsePlayIntegrityJson(fixtures[name]);
    expect(parsed.ok, parsed.ok ? '' : parsed.problem).toBe(true);
    expect(
      parsePlayIntegrityPayload(new TextEncoder().encode(JSON.stringify(fixtures[name]))).ok,
    ).toBe(true);
  });

  it('standard-request: every optional section is read', () => {
    const parsed = parsePlayIntegrityJson(fixtures['standard-request']);
    expect(parsed.ok && parsed.payload).toMatchObject({
      requestDetails: {
        requestPackageName: 'com.package.name',
        requestHash: 'aGVsbG8gd29scmQgdGhlcmU',
        timestampMillis: 1675655009345,
      },
      appIntegrity: { appRecognitionVerdict: 'PLAY_RECOGNIZED', versionCode: '42' },
      deviceIntegrity: {
        deviceRecognitionVerdict: ['MEETS_DEVICE_INTEGRITY'],
        deviceAttributes: { sdkVersion: 33 },
        recentDeviceActivity: { deviceActivityLevel: 'LEVEL_2' },
      },
      accountDetails: { appLicensingVerdict: 'LICENSED' },
      environmentDetails: {
        playProtectVerdict: 'NO_ISSUES',
        appAccessRiskVerdict: {
          appsDetected: [
            'KNOWN_INSTALLED',
            'KNOWN_CAPTURING',
            'UNKNOWN_INSTALLED',
            'UNKNOWN_OVERLAYS',
          ],
        },
      },
    });
  });

  it('classic-request carries the nonce, not a request hash', () => {
    const parsed = parsePlayIntegrityJson(fixtures['classic-request']);
    expect(parsed.ok && parsed.payload.requestDetails).toEqual({
      requestPackageName: 'com.package.name',
      nonce: 'aGVsbG8gd29scmQgdGhlcmU',
      timestampMillis: 1675655009345,
    });
  });

  it('the "empty" forms parse to absent verdicts', () => {
    const parsed = parsePlayIntegrityJson(fixtures['unevaluated-everything']);
    expect(parsed.ok && parsed.payload).toMatchObject({
      appIntegrity: { appRecognitionVerdict: 'UNEVALUATED' },
      deviceIntegrity: { recentDeviceActivity: { deviceActivityLevel: 'UNEVALUATED' } },
      environmentDetails: { appAccessRiskVerdict: {} },
    });
    expect(parsed.ok && parsed.payload.deviceIntegrity.deviceRecognitionVerdict).toBeUndefined();
  });

  it('int64 and int32 fields in either JSON form', () => {
    const numeric = parsePlayIntegrityJson(fixtures['numeric-forms']);
    expect(
      numeric.ok && [
        numeric.payload.requestDetails.timestampMillis,
        numeric.payload.appIntegrity.versionCode,
        numeric.payload.deviceIntegrity.deviceAttributes?.sdkVersion,
      ],
    ).toEqual([1675655009345, '42', 34]);
    const seconds = parsePlayIntegrityJson(fixtures['seconds-sized-timestamp']);
    expect(seconds.ok && seconds.payload.requestDetails.timestampMillis).toBe(1617893780);
  });
});
