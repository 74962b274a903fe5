/** What the RP learns from an accepted `gms-pc` token (the result token's `googlePcTokenDetails`). */
export interface GooglePcTokenDetails {
  packageName: string;
  /** every label Google sent, unknown future ones included */
  deviceRecognitionVerdict: string[];
  requestTimeMillis: number;
  appLicensingVerdict?: string;
  isTestingResponse?: boolean;
}
