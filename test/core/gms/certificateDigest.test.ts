import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  formatCertificateDigest,
  parseCertificateDigest,
} from '../../../src/core/gms/certificateDigest.js';

const digest = new Uint8Array(createHash('sha256').update('a signing certificate').digest());
const hex = Buffer.from(digest).toString('hex');
const colons = hex.match(/../g)!.join(':');

describe('parseCertificateDigest', () => {
  it.each([
    ['lower-case hex', hex],
    ['upper-case hex', hex.toUpperCase()],
    ['colon-separated hex (Play Console, keytool)', colons.toUpperCase()],
    ['colon-separated lower-case hex', colons],
    ['padded base64', Buffer.from(digest).toString('base64')],
    ['unpadded base64url (as in verdicts)', Buffer.from(digest).toString('base64url')],
    ['hex with surrounding whitespace', `  ${hex}\n`],
  ])('reads %s', (_, text) => {
    expect(parseCertificateDigest(text)).toEqual(digest);
  });

  it.each([
    ['empty text', ''],
    ['31 bytes of hex', hex.slice(0, 62)],
    ['33 bytes of hex', `${hex}00`],
    ['hex with a stray character', `${hex.slice(0, 63)}g`],
    ['colons in the wrong places', `${hex.slice(0, 3)}:${hex.slice(3)}`],
    ['a trailing colon', `${colons}:`],
    ['mixed colons and bare pairs', colons.replace(':', '')],
    ['base64 of 31 bytes', Buffer.from(digest.slice(0, 31)).toString('base64')],
    ['base64 of 33 bytes', Buffer.from([...digest, 0]).toString('base64')],
    ['base64 with a bad character', `${Buffer.from(digest).toString('base64url').slice(0, 42)}!`],
    ['SHA-1 fingerprint', 'AB:'.repeat(19) + 'AB'],
  ])('refuses %s', (_, text) => {
    expect(parseCertificateDigest(text)).toBeNull();
  });
});

describe('formatCertificateDigest', () => {
  it('formats as the Play Console does, and parses back', () => {
    expect(formatCertificateDigest(digest)).toBe(colons.toUpperCase());
    expect(parseCertificateDigest(formatCertificateDigest(digest))).toEqual(digest);
  });
});
