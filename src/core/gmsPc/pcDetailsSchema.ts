import { EPOCH_MILLIS, STRING_LIST, type DetailsSchema } from '../detailsSchema.js';

/** Play Integrity for PC's details in the verify answer (`googlePcTokenDetails`), as OpenAPI schemas. */
export const gmsPcDetailsSchema: DetailsSchema = {
  responseField: 'googlePcTokenDetails',
  main: 'GooglePcTokenDetails',
  components: {
    GooglePcTokenDetails: {
      type: 'object',
      required: ['packageName', 'deviceRecognitionVerdict', 'requestTimeMillis'],
      description:
        "A gms-pc token's verdict (Play Integrity for PC, decoded by Google's decodePcIntegrityToken). Labels Google adds later are passed through as they come; a client must accept labels it does not know and the absence of the optional fields.",
      properties: {
        packageName: { type: 'string' },
        deviceRecognitionVerdict: {
          ...STRING_LIST,
          description: 'deviceIntegrity.deviceRecognitionVerdict (MEETS_PC_INTEGRITY, ...)',
        },
        requestTimeMillis: {
          ...EPOCH_MILLIS,
          description: 'requestDetails.requestTime in milliseconds since the epoch',
        },
        appLicensingVerdict: {
          type: 'string',
          description: 'accountDetails.appLicensingVerdict (LICENSED, UNLICENSED, UNEVALUATED)',
        },
        isTestingResponse: {
          type: 'boolean',
          description: 'testingDetails.isTestingResponse: a statically overridden tester verdict',
        },
      },
    },
  },
};
