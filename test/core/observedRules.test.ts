import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { silentTrace } from '../../src/core/apple/silentTrace.js';
import {
  isObservableReason,
  OBSERVABLE_REASONS,
  observableCodes,
  parseObserveCodes,
} from '../../src/core/observedRules.js';
import { Rejection } from '../../src/core/reasons.js';
import { REJECT_REASONS } from '../../src/core/rejectReasons.js';
import { TraceRecorder } from '../../src/core/trace.js';
import type { PlatformVerifier } from '../../src/core/ports.js';
import { verifyToken } from '../../src/core/verify.js';
import { appleEvidence, token } from '../support/tokens.js';

const nonce = new Uint8Array(randomBytes(32));
const now = () => new Date('2026-06-01T00:00:00Z');

/** Why a call threw, or 'returned'. */
function outcomeOf(call: () => void): string {
  try {
    call();
    return 'returned';
  } catch (err) {
    if (err instanceof Rejection) return err.reason;
    throw err;
  }
}

/**
 * A verifier whose three policy rules fail or pass as `failing` says, run in order, with a check
 * after them that records whether it ran (so "the checks after an observed failure still run").
 */
function policyVerifier(
  observe: readonly string[],
  failing: readonly string[],
): PlatformVerifier & { reachedEnd: boolean } {
  const fake = {
    service: 'apple' as const,
    reachedEnd: false,
    async verify(_evidence: unknown, ctx: Parameters<PlatformVerifier['verify']>[1]) {
      const { trace } = ctx;
      trace.plan(['apple.attestation.environment', 'apple.attestation.distribution']);
      trace.observe(observe);
      const rules = [
        ['apple.attestation.environment', 'apple_environment_not_allowed'],
        ['apple.attestation.distribution', 'apple_distribution_not_allowed'],
        ['apple.assertion.policy', 'apple_risk_exceeded'],
      ] as const;
      for (const [id, reason] of rules) {
        trace.current(id);
        if (failing.includes(reason)) trace.policyFailed(id, reason, `${reason} failed`);
        else trace.pass(id, 'ok');
      }
      fake.reachedEnd = true;
      return {
        service: 'apple' as const,
        appleTokenDetails: {
          keyIdentifier: 'k',
          appId: 'T.a',
          environment: 'Production' as const,
          assertionCounter: 1,
          platform: 'iOS' as const,
        },
      };
    },
  };
  return fake;
}

const run = (verifier: PlatformVerifier) =>
  verifyToken(
    { token: token(nonce, { evidence: appleEvidence() }), expectedNonce: nonce },
    { now, verifiers: { apple: verifier } },
  );

describe('the decision at the end of a verification', () => {
  it('no failure: valid, with no observed list', async () => {
    const outcome = await run(policyVerifier([], []));
    expect(outcome.ok).toBe(true);
    expect(outcome.ok && outcome.observed).toBeUndefined();
  });

  it('an enforced failure rejects with its reason, attributed to its check; later checks do not run', async () => {
    const verifier = policyVerifier([], ['apple_distribution_not_allowed']);
    const outcome = await run(verifier);
    expect(outcome).toMatchObject({ ok: false, reason: 'apple_distribution_not_allowed' });
    expect(verifier.reachedEnd).toBe(false);
    expect(outcome.checks.find((c) => c.status === 'fail')).toMatchObject({
      id: 'apple.attestation.distribution',
      reason: 'apple_distribution_not_allowed',
    });
  });

  it('only observed failures: valid with the usual details, every observed failure listed once in order, and the checks after them ran', async () => {
    const failing = ['apple_environment_not_allowed', 'apple_risk_exceeded'];
    const verifier = policyVerifier(failing, failing);
    const outcome = await run(verifier);
    expect(outcome).toMatchObject({
      ok: true,
      details: { service: 'apple' },
      observed: ['apple_environment_not_allowed', 'apple_risk_exceeded'],
    });
    expect(verifier.reachedEnd).toBe(true);
    expect(outcome.checks.filter((c) => c.status === 'observed')).toEqual([
      {
        id: 'apple.attestation.environment',
        status: 'observed',
        detail: 'apple_environment_not_allowed failed',
        reason: 'apple_environment_not_allowed',
      },
      {
        id: 'apple.assertion.policy',
        status: 'observed',
        detail: 'apple_risk_exceeded failed',
        reason: 'apple_risk_exceeded',
      },
    ]);
    expect(outcome.checks.some((c) => c.status === 'fail')).toBe(false);
  });

  it('an observed failure then an enforced one: rejected with the enforced reason', async () => {
    const outcome = await run(
      policyVerifier(
        ['apple_environment_not_allowed'],
        ['apple_environment_not_allowed', 'apple_distribution_not_allowed'],
      ),
    );
    expect(outcome).toMatchObject({ ok: false, reason: 'apple_distribution_not_allowed' });
    expect(outcome.checks.map((c) => c.status)).toContain('observed');
  });

  it('observing a rule that passes records nothing', async () => {
    const outcome = await run(policyVerifier(['apple_risk_exceeded'], []));
    expect(outcome.ok && outcome.observed).toBeUndefined();
  });
});

describe('TraceRecorder.policyFailed', () => {
  it('enforces until the entry is known, and enforces codes the entry does not observe', () => {
    const trace = new TraceRecorder();
    expect(outcomeOf(() => trace.policyFailed('gms.playProtect', 'gms_play_protect', 'x'))).toBe(
      'gms_play_protect',
    );
    trace.observe(['gms_device_activity']);
    expect(outcomeOf(() => trace.policyFailed('gms.playProtect', 'gms_play_protect', 'x'))).toBe(
      'gms_play_protect',
    );
    expect(
      outcomeOf(() => trace.policyFailed('gms.deviceActivity', 'gms_device_activity', 'x')),
    ).toBe('returned');
    expect(trace.observed()).toEqual(['gms_device_activity']);
  });

  it('enforced, a rule may keep another documented reason; observed, it is its own code', () => {
    const trace = new TraceRecorder();
    const call = () =>
      trace.policyFailed(
        'apple.assertion.appId',
        'apple_environment_not_allowed',
        'x',
        'apple_app_not_allowed',
      );
    expect(outcomeOf(call)).toBe('apple_app_not_allowed');
    trace.observe(['apple_environment_not_allowed']);
    expect(outcomeOf(call)).toBe('returned');
    expect(trace.observed()).toEqual(['apple_environment_not_allowed']);
  });

  it('a code outside the table is enforced even when a stored set names it', () => {
    const trace = new TraceRecorder();
    trace.observe(['apple_signature_invalid']);
    const call = () =>
      trace.policyFailed('apple.assertion.signature', 'apple_signature_invalid' as never, 'x');
    expect(outcomeOf(call)).toBe('apple_signature_invalid');
  });

  it('the silent trace (no collector) enforces every rule', () => {
    const trace = silentTrace();
    trace.observe(['gms_play_protect']);
    expect(outcomeOf(() => trace.policyFailed('gms.playProtect', 'gms_play_protect', 'x'))).toBe(
      'gms_play_protect',
    );
  });
});

describe('the observable codes', () => {
  it('are reason codes, each of one service, and no identity reason is among them', () => {
    const all = Object.values(OBSERVABLE_REASONS).flat();
    for (const code of all) expect(REJECT_REASONS).toContain(code);
    // device_rate_exceeded is the one rule of two services (an App Attest or android-key key's
    // verifies); each kind of entry still lists it once (below)
    const shared = all.filter((c) => c === 'device_rate_exceeded');
    expect(shared).toHaveLength(2);
    const rest = all.filter((c) => c !== 'device_rate_exceeded');
    expect(new Set(rest).size).toBe(rest.length);
    for (const entry of ['apple', 'android'] as const)
      expect(new Set(observableCodes(entry)).size).toBe(observableCodes(entry).length);
    for (const identity of [
      'token_malformed',
      'nonce_mismatch',
      'session_consumed',
      'gms_signature_invalid',
      'gms_certificate_mismatch',
      'gms_package_mismatch',
      'gms_token_stale',
      'apple_chain_invalid',
      'apple_counter_replay',
      'apple_app_not_allowed',
      'apple_key_id_mismatch',
      'android_chain_revoked',
      'android_app_signature_mismatch',
      'android_package_not_allowed',
    ])
      expect(isObservableReason(identity)).toBe(false);
  });

  it('an android entry observes gms and android-key codes, an apple entry apple ones', () => {
    expect(observableCodes('android')).toEqual([
      ...OBSERVABLE_REASONS.gms,
      ...OBSERVABLE_REASONS['android-key'],
    ]);
    expect(observableCodes('apple')).toEqual([...OBSERVABLE_REASONS.apple]);
  });

  it('parses --observe lists in table order, and names the observable codes when one is not', () => {
    expect(parseObserveCodes('android', ' android_patch_level_stale,GMS_PLAY_PROTECT ')).toEqual({
      ok: true,
      codes: ['gms_play_protect', 'android_patch_level_stale'],
    });
    const refused = parseObserveCodes('android', 'gms_play_protect,gms_token_stale');
    expect(refused.ok).toBe(false);
    expect(!refused.ok && refused.problem).toContain('"gms_token_stale"');
    expect(!refused.ok && refused.problem).toContain(observableCodes('android').join(', '));
    expect(parseObserveCodes('apple', 'gms_play_protect').ok).toBe(false);
    expect(parseObserveCodes('apple', ' , ').ok).toBe(false);
  });
});
