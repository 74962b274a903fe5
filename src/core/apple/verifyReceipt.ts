/**
 * App Attest receipts (Apple's "Assessing fraud risk"): a CMS SignedData (RFC 5652, BER with
 * indefinite lengths as Apple sends it) signed by "Application Attestation Fraud Receipt Signing",
 * which chains to Apple Root CA - G3, whose content is a SET of (type, version, value) attributes.
 *
 * The receipt is covered by no signature of the attestation, so anyone can put any bytes there:
 * every step's cost is bounded before it runs. The outline (tags and lengths only) is bounded in
 * size, depth and element count; certificates in count, size and key type; and the signer's chain
 * follows ONE fixed path, tried once: the certificate the SignerInfo names -> the one certificate
 * named as its issuer (the App Attest intermediate) -> the configured root named as that one's issuer
 * (Apple Root CA - G3), found by name and key identifier before any signature is checked. So a
 * receipt costs at most three signature checks (intermediate, signer, CMS), a chain that verified
 * is remembered by its bytes (a real receipt then costs one), and a chain that failed is
 * remembered by its bytes too (a replay costs none). Certificates are read by node:crypto, values
 * by asn1js. It never throws on hostile bytes: every problem is a `{ valid: false, problem }` value.
 */
import { createHash, verify as verifySignature, X509Certificate } from 'node:crypto';
import { LruCache } from '../lruCache.js';
import { APPLE_ROOT_CA_G3_PEM } from './appleRootCaG3.js';
import {
  commonName,
  readCertificate,
  readFacts,
  readStructure,
  type ReadCertificate,
  type ReceiptFacts,
  type ReceiptStructure,
  type ReceiptType,
} from './receiptStructure.js';
import { parseTrustRoots } from './trustRoots.js';

/** The outcome of a receipt check: `problem` names the first thing that failed. */
export type ReceiptVerdict =
  | { valid: true; facts: ReceiptFacts }
  | { valid: false; problem: string; facts: ReceiptFacts | null };

/** What the receipt must say. */
export interface ReceiptExpectation {
  /** absent = either type (a receipt file checked alone) */
  type?: ReceiptType;
  /** the attestation's (or the stored key's) App ID; absent = not compared */
  appId?: string;
  /** the attestation's `x5c[0]`, byte for byte; absent = not compared */
  attestedCertificate?: Uint8Array;
}

/** Verifies receipts against fixed trust roots. */
export interface ReceiptVerifier {
  readonly roots: readonly X509Certificate[];
  /**
   * Checks `receipt` at `now`: CMS signature, signer chain (valid at `now`), attributes.
   * @param receipt the receipt bytes (DER or BER)
   * @param expect the type, App ID and attested certificate it must carry
   * @param now the verification instant
   */
  verify(receipt: Uint8Array, expect: ReceiptExpectation, now: Date): Promise<ReceiptVerdict>;
}

/** Options of a receipt verifier. */
export interface ReceiptVerifierOptions {
  /** called before every signature check (tests count them: each input's cost is bounded) */
  onSignatureCheck?: () => void;
}

let g3Roots: readonly X509Certificate[] | undefined;

/** The built-in Apple Root CA - G3, parsed once. */
export function defaultReceiptRoots(): readonly X509Certificate[] {
  g3Roots ??= Object.freeze(parseTrustRoots(APPLE_ROOT_CA_G3_PEM));
  return g3Roots;
}

/**
 * The receipt verifier a test-mode API key uses: `receipts`' roots plus the development root
 * (`attest dev init`), through the same fixed path. Live keys never get it, so a receipt signed
 * through the development CA is invalid for them.
 * @param receipts the live receipt verifier (absent: Apple Root CA - G3)
 * @param devRoot the development CA root (DER), or null before `attest dev init`
 */
export function withDevelopmentReceiptRoot(
  receipts: ReceiptVerifier | undefined,
  devRoot: Uint8Array | null,
): ReceiptVerifier | undefined {
  if (!devRoot) return receipts;
  const roots = receipts?.roots ?? defaultReceiptRoots();
  return createReceiptVerifier([...roots, new X509Certificate(devRoot)]);
}

/**
 * Builds a receipt verifier over `roots` (Apple Root CA - G3 by default; tests replace it).
 * @param roots trust anchors for the receipt signer's chain
 * @param options a hook that counts signature checks
 */
export function createReceiptVerifier(
  roots: readonly X509Certificate[] = defaultReceiptRoots(),
  options: ReceiptVerifierOptions = {},
): ReceiptVerifier {
  if (roots.length === 0) throw new Error('receipts need at least one trust root');
  const anchors = roots.map((root) => {
    const read = readCertificate(root.raw);
    if (typeof read === 'string') throw new Error(`a receipt trust root is unusable: ${read}`);
    return read;
  });
  const countSignature = options.onSignatureCheck ?? (() => {});
  // certificates read (any receipt's: bounded, hostile ones may evict others)...
  const certificates = new LruCache<string, ReadCertificate | string>(64);
  // ...and those of chains that verified (only Apple's, in practice: a real receipt finds them here)
  const trusted = new LruCache<string, ReadCertificate>(16);
  // chains by the SHA-256 of their certificates and root: verified, or the problem found
  const verifiedChains = new LruCache<string, true>(16);
  const failedChains = new LruCache<string, string>(256);

  function certificateOf(der: Buffer): ReadCertificate | string {
    const hash = createHash('sha256').update(der).digest('hex');
    const known = trusted.get(hash) ?? certificates.get(hash);
    if (known !== undefined) return known;
    const read = readCertificate(der, hash);
    certificates.set(hash, read);
    return read;
  }

  function signed(cert: ReadCertificate, issuer: ReadCertificate): boolean {
    countSignature();
    try {
      return cert.x509.verify(issuer.publicKey);
    } catch {
      return false;
    }
  }

  /**
   * The fixed path, with everything but signatures checked: names, key identifiers, key types,
   * validity at `now`. A string is the problem.
   */
  function pathOf(structure: ReceiptStructure, now: Date) {
    const read: ReadCertificate[] = [];
    for (const der of structure.certificates) {
      const cert = certificateOf(der);
      if (typeof cert === 'string') return cert;
      if (!read.some((r) => r.hash === cert.hash)) read.push(cert);
    }
    const { signer } = structure;
    const leaves = read.filter(
      (c) => c.serial.equals(signer.serial) && c.issuer.equals(signer.issuer),
    );
    if (leaves.length !== 1)
      return leaves.length === 0
        ? 'the SignedData does not carry the certificate its SignerInfo names'
        : 'two certificates of the SignedData match its SignerInfo';
    const leaf = leaves[0]!;
    if (!leaf.receiptSigner) return 'the signer is not an App Attest receipt signing certificate';
    const issuers = read.filter((c) => c !== leaf && c.subject.equals(leaf.issuer));
    if (issuers.length !== 1)
      return issuers.length === 0
        ? "the signer chain does not verify: the SignedData does not carry the signer's issuer"
        : `the signer chain does not verify: ${issuers.length} certificates are named as the signer's issuer; App Attest receipts carry one`;
    const intermediate = issuers[0]!;
    if (!intermediate.x509.ca)
      return "the signer chain does not verify: the signer's issuer is not a CA certificate";
    if (intermediate.subject.equals(intermediate.issuer))
      return "the signer chain does not verify: the signer's issuer is a root; receipts carry an intermediate";
    // the root by name and key identifier (OpenSSL's issuer check, no signature) before anything below it
    const rootIndex = anchors.findIndex(
      (a) => a.subject.equals(intermediate.issuer) && intermediate.x509.checkIssued(a.x509),
    );
    if (rootIndex < 0)
      return `the signer chain does not verify: the intermediate "${commonName(intermediate)}" is not issued by a configured root`;
    const root = anchors[rootIndex]!;
    for (const [cert, what] of [
      [leaf, 'the signer certificate'],
      [intermediate, 'the intermediate'],
    ] as const) {
      if (cert.keyProblem)
        return `the signer chain does not verify: ${what} has ${cert.keyProblem}`;
    }
    for (const [cert, what] of [
      [root, 'the root'],
      [intermediate, 'the intermediate'],
      [leaf, 'the signer certificate'],
    ] as const) {
      if (now.getTime() < cert.notBefore.getTime())
        return `the signer chain does not verify: ${what} is not valid before ${cert.notBefore.toISOString()}`;
      if (now.getTime() > cert.notAfter.getTime())
        return `the signer chain does not verify: ${what} expired at ${cert.notAfter.toISOString()}`;
    }
    const key = `${leaf.hash}:${intermediate.hash}:${rootIndex}`;
    return { leaf, intermediate, root, key };
  }

  /** The path's two signatures, each path checked once: verified or failed, it is remembered. */
  function chainProblem(path: Exclude<ReturnType<typeof pathOf>, string>): string | null {
    if (verifiedChains.get(path.key)) return null;
    const failed = failedChains.get(path.key);
    if (failed !== undefined) return failed;
    const problem = !signed(path.intermediate, path.root)
      ? 'the signer chain does not verify: the intermediate is not signed by the root'
      : !signed(path.leaf, path.intermediate)
        ? 'the signer chain does not verify: the signer certificate is not signed by the intermediate'
        : null;
    if (problem) {
      failedChains.set(path.key, problem);
      return problem;
    }
    verifiedChains.set(path.key, true);
    trusted.set(path.leaf.hash, path.leaf);
    trusted.set(path.intermediate.hash, path.intermediate);
    return null;
  }

  function cmsProblem(structure: ReceiptStructure, leaf: ReadCertificate): string | null {
    const { signer, content } = structure;
    const bad = 'the CMS signature does not verify (RFC 5652)';
    if (signer.signedAttributes) {
      const digest = createHash(signer.digest).update(content).digest();
      if (!signer.messageDigest?.equals(digest))
        return `${bad}: the message digest attribute is not the content's ${signer.digest}`;
    }
    if (signer.signature.key !== leaf.publicKey.asymmetricKeyType)
      return `${bad}: a ${signer.signature.key} signature by a ${leaf.publicKey.asymmetricKeyType} key`;
    countSignature();
    let ok = false;
    try {
      ok = verifySignature(
        signer.signature.hash,
        signer.signedAttributes ?? content,
        { key: leaf.publicKey, dsaEncoding: 'der' },
        signer.signature.bytes,
      );
    } catch {
      ok = false;
    }
    return ok ? null : bad;
  }

  return {
    roots,
    async verify(receipt, expect, now) {
      let facts: ReceiptFacts | null = null;
      try {
        const structure = readStructure(receipt);
        if (typeof structure === 'string') return { valid: false, problem: structure, facts };
        const read = readFacts(structure.content);
        if (typeof read === 'string') return { valid: false, problem: read, facts };
        facts = read;
        // everything that costs no signature first: the path, then what the receipt says
        const path = pathOf(structure, now);
        if (typeof path === 'string') return { valid: false, problem: path, facts };
        const attributes = attributeProblem(facts, expect, now);
        if (attributes) return { valid: false, problem: attributes, facts };
        const problem = chainProblem(path) ?? cmsProblem(structure, path.leaf);
        return problem ? { valid: false, problem, facts } : { valid: true, facts };
      } catch (err) {
        // a fault of a library on bytes the bounds let through: still a verdict, never a hang
        return { valid: false, problem: `unreadable receipt (${describe(err)})`, facts };
      }
    },
  };
}

/**
 * The attributes of a receipt without checking its signature or chain: for a receipt this service
 * checked before it stored it (the refresher needs its attested certificate). Null when unreadable.
 * @param receipt the receipt bytes
 */
export function readReceiptFacts(receipt: Uint8Array): ReceiptFacts | null {
  try {
    const structure = readStructure(receipt);
    if (typeof structure === 'string') return null;
    const facts = readFacts(structure.content);
    return typeof facts === 'string' ? null : facts;
  } catch {
    return null;
  }
}

function attributeProblem(facts: ReceiptFacts, expect: ReceiptExpectation, now: Date) {
  if (
    expect.type === undefined
      ? !['ATTEST', 'RECEIPT'].includes(facts.type)
      : facts.type !== expect.type
  )
    return `the receipt type is ${JSON.stringify(facts.type.slice(0, 16))}, not ${expect.type ?? 'ATTEST or RECEIPT'}`;
  if (expect.appId !== undefined && facts.appId !== expect.appId)
    return `the receipt is for App ID ${JSON.stringify(facts.appId.slice(0, 128))}, not "${expect.appId}"`;
  if (
    expect.attestedCertificate !== undefined &&
    !Buffer.from(facts.attestedCertificate).equals(Buffer.from(expect.attestedCertificate))
  )
    return "the receipt's attested certificate is not the attestation's x5c[0]";
  if (facts.creationTime.getTime() > now.getTime())
    return `the receipt was created at ${facts.creationTime.toISOString()}, after the verification time ${now.toISOString()}`;
  if (facts.expirationTime && facts.expirationTime.getTime() < now.getTime())
    return `the receipt expired at ${facts.expirationTime.toISOString()}`;
  return null;
}

function describe(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).slice(0, 200);
}
