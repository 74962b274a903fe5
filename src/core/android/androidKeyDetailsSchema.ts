import { BASE64_STRING, type DetailsSchema } from '../detailsSchema.js';

/** Android key attestation's details in the verify answer (`androidKeyDetails`), as OpenAPI schemas. */
export const androidKeyDetailsSchema: DetailsSchema = {
  responseField: 'androidKeyDetails',
  main: 'AndroidKeyDetails',
  components: {
    AndroidKeyDetails: {
      type: 'object',
      description: 'Android hardware key attestation (device.service android-key)',
      required: [
        'keyIdentifier',
        'packageName',
        'securityLevel',
        'verifiedBootState',
        'deviceLocked',
        'osPatchLevel',
        'attestationVersion',
      ],
      properties: {
        keyIdentifier: {
          ...BASE64_STRING,
          description: 'base64 of keyId, SHA-256 of the key SPKI',
        },
        packageName: { type: 'string' },
        securityLevel: {
          enum: ['TrustedEnvironment', 'StrongBox'],
          description: 'the lower of the attestation and KeyMint security levels',
        },
        verifiedBootState: { enum: ['Verified', 'SelfSigned', 'Unverified', 'Failed'] },
        deviceLocked: { type: 'boolean' },
        osPatchLevel: {
          type: ['integer', 'null'],
          description: 'YYYYMM, or null when the key description has none',
        },
        attestationVersion: { type: 'integer', minimum: 0 },
      },
    },
  },
};
