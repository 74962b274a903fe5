/**
 * `verify-file --challenge` on a real Google chain: every public capture's challenge is fixed, so
 * only a given challenge takes it past android.challenge. Every later check then runs (here the
 * package check refuses another package), and the output, text and JSON, says the challenge was
 * given, not derived from the nonce.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadAndroidVectors, vectorPackage, vectorToken } from '../support/androidVectors.js';
import { verifyFile } from '../support/verifyFileTokens.js';

const dir = mkdtempSync(join(tmpdir(), 'attest-challenge-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// a factory Pixel chain to Google's root, locked and verified, valid at its capture time
const v = loadAndroidVectors().find(
  (x) => x.id === 'google-keyattestation-pixel9a-tee-ec-2026-root',
)!;
const nonce = randomBytes(32);
const file = join(dir, 'pixel9a.cbor');
writeFileSync(file, vectorToken(v, nonce));
const base = [file, '--nonce', nonce.toString('base64'), '--at', v.verifyAt];
const status = (run: Awaited<ReturnType<typeof verifyFile>>, id: string) =>
  run.json!.checks.find((c) => c.id === id)?.status;

describe('verify-file --challenge (android-key)', () => {
  it('without it, the fixed challenge of a capture stops at android.challenge', async () => {
    const run = await verifyFile([...base, '--package', vectorPackage(v), '--json']);
    expect(run.json!.reason).toBe('android_challenge_mismatch');
    expect(run.json).not.toHaveProperty('challenge');
  });

  it('with it, the chain passes the challenge and reaches the package check, which refuses another package; the JSON says given', async () => {
    const args = [...base, '--challenge', v.challenge.base64, '--json'];
    const other = await verifyFile([...args, '--package', 'com.example.other']);
    expect(status(other, 'android.challenge')).toBe('pass');
    expect(other.json!.checks.find((c) => c.id === 'android.challenge')!.detail).toMatch(
      /given challenge/,
    );
    expect(other.json!.valid).toBe(false);
    expect(other.json!.reason).toBe('android_package_not_allowed');
    expect(other.json!.challenge).toBe('given');

    const own = await verifyFile([...args, '--package', vectorPackage(v)]);
    expect(own.json!.valid).toBe(true);
    expect(own.json!.challenge).toBe('given');
  });

  it('the text report says the challenge was given, not derived', async () => {
    const run = await verifyFile([
      ...base,
      '--challenge',
      v.challenge.base64,
      '--package',
      vectorPackage(v),
    ]);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/challenge: GIVEN \(--challenge\), not derived from the nonce/);
  });
});
