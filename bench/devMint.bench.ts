/**
 * What `attest dev` costs besides process start and the database: making the development CA
 * (two P-384 keys), minting an App Attest registration (a leaf certificate) and an assertion,
 * sealing a Play Integrity token. `npx vitest bench --run --project shared bench/devMint.bench.ts`.
 */
import { createHash } from 'node:crypto';
import { bench, describe } from 'vitest';
import {
  createDevCa,
  createSimulatedKey,
  mintAssertion,
  mintAttestation,
} from '../src/core/dev/devCa.js';
import {
  createTestPlayKeys,
  sealIntegrityToken,
  verdictPayload,
} from '../src/core/dev/playIntegrityMint.js';

const now = new Date();
const clientDataHash = createHash('sha256').update('bench nonce').digest();
const ca = await createDevCa(now);
const key = createSimulatedKey();
const pair = createTestPlayKeys();
const appId = 'ABCDE12345.com.example.bench';

describe('attest dev', () => {
  bench('dev init: createDevCa', async () => {
    await createDevCa(now);
  });
  bench('dev mint apple: registration', async () => {
    await mintAttestation(ca, key, { appId, environment: 'Production', clientDataHash, now });
  });
  bench('dev mint apple: assertion', () => {
    mintAssertion(key, { appId, counter: 1, clientDataHash });
  });
  bench('dev mint gms: seal', async () => {
    await sealIntegrityToken(
      pair,
      verdictPayload({
        packageName: 'com.example.bench',
        nonce: clientDataHash,
        issuedAt: now,
        deviceVerdicts: ['MEETS_DEVICE_INTEGRITY'],
        recognition: 'PLAY_RECOGNIZED',
        certificateDigests: [],
      }),
    );
  });
});
