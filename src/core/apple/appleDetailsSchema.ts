import { BASE64_STRING, type DetailsSchema } from '../detailsSchema.js';

/** App Attest's details in the verify answer (`appleTokenDetails`), as OpenAPI schemas. */
export const appleDetailsSchema: DetailsSchema = {
  responseField: 'appleTokenDetails',
  main: 'AppleTokenDetails',
  components: {
    AppleTokenDetails: {
      type: 'object',
      required: ['keyIdentifier', 'appId', 'environment', 'assertionCounter', 'platform'],
      properties: {
        keyIdentifier: BASE64_STRING,
        appId: { type: 'string', description: '<TEAMID>.<bundle id>' },
        environment: { enum: ['Development', 'Production'] },
        assertionCounter: { type: 'integer', minimum: 0 },
        platform: {
          enum: ['iOS', 'macOS'],
          description:
            "extension: where the key was made: macOS (27+) keys carry a key access-control extension in their leaf certificate; an assertion reports the platform stored at the key's registration",
        },
        riskMetric: {
          type: 'integer',
          minimum: 0,
          description:
            "extension: Apple's risk metric from the key's latest refreshed App Attest receipt (attestations for this device and app over 30 days), when one is known",
        },
        validationCategory: {
          type: 'string',
          description:
            'extension (iOS 27+): how the app was distributed: platform, testflight, development, appstore, enterprise, developerid, or category-N for a value Apple has not documented',
        },
        bundleVersion: {
          type: 'string',
          description: "extension (iOS 27+): the app's bundle version as the device reported it",
        },
      },
    },
  },
};
