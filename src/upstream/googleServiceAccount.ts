import { importPKCS8 } from 'jose';
import { z } from 'zod';
import type { GoogleServiceAccount } from '../core/ports.js';

/** The fields of a Google Cloud service-account key file (JSON) that attest uses. */
const keyFile = z.object({
  type: z.literal('service_account'),
  client_email: z.string().regex(/^[^@\s]+@[^@\s]+$/),
  private_key_id: z.string().min(1).optional(),
  private_key: z.string().includes('PRIVATE KEY'),
});

/**
 * Reads a service-account key file as downloaded from the Google Cloud console, and checks that
 * its key imports as an RS256 signing key (so a broken file fails at `allowlist add`, not on the
 * first standard request).
 * @param text the file's JSON text
 * @returns the account, or a one-line problem that never quotes the key
 */
export async function parseServiceAccount(
  text: string,
): Promise<{ ok: true; account: GoogleServiceAccount } | { ok: false; problem: string }> {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return {
      ok: false,
      problem: 'not JSON: expected the service-account key file from the Google Cloud console',
    };
  }
  const parsed = keyFile.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return {
      ok: false,
      problem: `not a service-account key file: ${issue?.path.join('.') || 'file'} is missing or wrong`,
    };
  }
  const f = parsed.data;
  try {
    await importPKCS8(f.private_key, 'RS256');
  } catch {
    return { ok: false, problem: 'private_key is not an RSA private key in PKCS#8 PEM' };
  }
  return {
    ok: true,
    account: {
      clientEmail: f.client_email,
      ...(f.private_key_id ? { privateKeyId: f.private_key_id } : {}),
      privateKey: f.private_key,
    },
  };
}

/** The stored form: only what the grant needs, in the key file's own field names. */
export function serializeServiceAccount(account: GoogleServiceAccount): string {
  return JSON.stringify({
    type: 'service_account',
    client_email: account.clientEmail,
    private_key_id: account.privateKeyId,
    private_key: account.privateKey,
  });
}

/** Reads the stored form back (no key import: it was checked when stored). */
export function deserializeServiceAccount(text: string): GoogleServiceAccount {
  const f = keyFile.parse(JSON.parse(text));
  return {
    clientEmail: f.client_email,
    ...(f.private_key_id ? { privateKeyId: f.private_key_id } : {}),
    privateKey: f.private_key,
  };
}
