import { EPOCH_MILLIS, STRING_LIST, type DetailsSchema } from '../detailsSchema.js';

/** Play Integrity's details in the verify answer (`googleTokenDetails`), as OpenAPI schemas. */
export const gmsDetailsSchema: DetailsSchema = {
  responseField: 'googleTokenDetails',
  main: 'GoogleTokenDetails',
  components: {
    GoogleTokenDetails: {
      type: 'object',
      required: ['packageName', 'deviceIntegrityVerdicts', 'timestampMillis'],
      description:
        'The three required fields are the contract. The others are extensions for RP telemetry, present only when the Play Integrity payload carries them (the verdict is opted in on the Play Console and was evaluated); a client must accept their absence.',
      properties: {
        packageName: { type: 'string' },
        deviceIntegrityVerdicts: STRING_LIST,
        timestampMillis: EPOCH_MILLIS,
        appLicensingVerdict: {
          type: 'string',
          description:
            'extension: accountDetails.appLicensingVerdict (LICENSED, UNLICENSED, UNEVALUATED)',
        },
        playProtectVerdict: {
          type: 'string',
          description:
            'extension: environmentDetails.playProtectVerdict (NO_ISSUES, NO_DATA, POSSIBLE_RISK, MEDIUM_RISK, HIGH_RISK, UNEVALUATED)',
        },
        appsDetected: {
          ...STRING_LIST,
          description:
            'extension: environmentDetails.appAccessRiskVerdict.appsDetected (KNOWN_/UNKNOWN_ INSTALLED, CAPTURING, CONTROLLING, OVERLAYS)',
        },
        deviceActivityLevel: {
          type: 'string',
          description:
            'extension: deviceIntegrity.recentDeviceActivity.deviceActivityLevel (LEVEL_1 to LEVEL_4, UNEVALUATED)',
        },
        accountActivityLevel: {
          type: 'string',
          description:
            'extension: accountDetails.accountActivity.activityLevel (UNEVALUATED, UNUSUAL, UNKNOWN, TYPICAL_BASIC, TYPICAL_STRONG; a value Google adds later is passed on as is)',
        },
        locationSpoofingRiskVerdict: {
          ...STRING_LIST,
          description:
            'extension: environmentDetails.locationSpoofingRiskVerdict, the values as Google sends them',
        },
        legacyDeviceIntegrityVerdicts: {
          ...STRING_LIST,
          description:
            "extension: deviceIntegrity.legacyDeviceRecognitionVerdict, the device verdict under Google's previous rules, sent only during Google's transition to the new ones",
        },
        deviceRecall: { $ref: '#/components/schemas/DeviceRecall' },
        sdkVersion: {
          type: 'integer',
          description: 'extension: deviceIntegrity.deviceAttributes.sdkVersion (Android API level)',
        },
        versionCode: {
          type: 'string',
          description: 'extension: appIntegrity.versionCode, as a decimal string',
        },
      },
    },
    DeviceRecall: {
      type: 'object',
      description:
        "extension: deviceIntegrity.deviceRecall (Play device recall): the three bits the app's developer wrote for this device with POST /api/v1/android/device-recall, which survive a reset; a bit Google leaves out is false",
      required: ['bitFirst', 'bitSecond', 'bitThird'],
      properties: {
        bitFirst: { type: 'boolean' },
        bitSecond: { type: 'boolean' },
        bitThird: { type: 'boolean' },
        writeDates: { $ref: '#/components/schemas/DeviceRecallWriteDates' },
      },
    },
    DeviceRecallWriteDates: {
      type: 'object',
      description:
        "When each bit was last written, as YYYYMM in UTC (e.g. 202611), as far as Google's verdict gives it (Google documents a date for set bits only)",
      required: [],
      properties: {
        yyyymmFirst: { type: 'integer' },
        yyyymmSecond: { type: 'integer' },
        yyyymmThird: { type: 'integer' },
      },
    },
  },
};
