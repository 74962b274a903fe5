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
        attestationVersion: {
          type: 'integer',
          minimum: 0,
          description:
            'the KeyDescription version: 1 to 4 (Keymaster), 100 to 500 (KeyMint; 500 is Android 17); a later one is shown as given',
        },
        mlDsaVariant: {
          type: 'integer',
          description: 'extension: tag 11 ML_DSA_VARIANT (attestation version 500), when present',
        },
        usageCountLimit: {
          type: 'integer',
          description: 'extension: tag 405 USAGE_COUNT_LIMIT, when present',
        },
        trustedConfirmationRequired: {
          type: 'boolean',
          description:
            'extension: tag 508 TRUSTED_CONFIRMATION_REQUIRED (the key signs only through Android Protected Confirmation): true when present',
        },
        moduleHash: {
          ...BASE64_STRING,
          description: "extension: tag 724 MODULE_HASH, the digest of the device's APEX modules",
        },
        unknownTags: {
          type: 'array',
          items: { type: 'integer' },
          maxItems: 32,
          description:
            'extension: AuthorizationList tags of a schema later than this service knows, carried as data',
        },
        provisioningInfo: { $ref: '#/components/schemas/AndroidProvisioningInfo' },
      },
    },
    AndroidProvisioningInfo: {
      type: 'object',
      description:
        "extension: the provisioning information extension (1.3.6.1.4.1.11129.2.1.30) that Google's remote key provisioning writes into the attestation certificate, as data",
      required: ['entries'],
      properties: {
        certificatesIssued: {
          type: 'integer',
          description: 'key 1: certificates the provisioning server issued to the device',
        },
        entries: {
          type: 'object',
          description: 'every entry by its integer key as text',
          additionalProperties: { type: ['integer', 'string', 'boolean'] },
        },
      },
    },
  },
};
