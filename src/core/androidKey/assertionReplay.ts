import { createHash } from 'node:crypto';
import { Rejection } from '../reasons.js';
import type { AndroidKeyStore, KeyMode } from '../ports.js';
import type { Trace } from '../outcome.js';

/**
 * Accepts one assertion of a key over one final nonce once. An android-key assertion carries no
 * counter and no time: without this, one captured assertion verified again and again for whoever
 * sent it (and spent the device's --max-verifies-per-device). Called last, once every other check
 * passed, so a refused assertion records nothing. The server records (one INSERT ... ON CONFLICT
 * DO NOTHING); verify-file, which records nothing, asks when the same assertion was accepted, so
 * its explanation of a replay is the server's.
 */
export async function guardAssertionReplay(
  keys: AndroidKeyStore,
  keyId: Uint8Array,
  signed: { nonce: Uint8Array; mode: KeyMode; now: Date },
  trace: Trace,
): Promise<void> {
  if (!keys.recordAssertion && !keys.assertionAcceptedAt) {
    trace.skip('android.replay', 'nothing is recorded here (no database)');
    return;
  }
  trace.current('android.replay');
  const digest = createHash('sha256').update(keyId).update(signed.nonce).digest();
  if (keys.recordAssertion) {
    if (!(await keys.recordAssertion({ digest, mode: signed.mode, at: signed.now })))
      throw new Rejection(
        'android_assertion_replayed',
        'this key already made an accepted assertion over this final nonce: a replay',
      );
    trace.pass('android.replay', 'the first assertion of this key over this final nonce');
    return;
  }
  const acceptedAt = await keys.assertionAcceptedAt!(digest, signed.mode);
  if (acceptedAt)
    throw new Rejection(
      'android_assertion_replayed',
      `this key already made an accepted assertion over this final nonce, at ${acceptedAt.toISOString()}: a replay`,
    );
  trace.pass(
    'android.replay',
    'no assertion of this key over this final nonce was accepted (verify-file records nothing)',
  );
}
