/**
 * What an evidence kind is, as core sees it: everything the generic code (the services list, the
 * verify answer's shapes, check titles, reasons, hints, result tokens, the platform table) needs
 * to know about one kind, declared once in the kind's folder (`<kind>/<kind>Kind.ts`) and listed
 * in src/core/kinds.ts, from which every list of kinds derives.
 */
import type { X509Certificate } from 'node:crypto';
import type { AndroidRootKey } from './androidKey/trustRoots.js';
import type { IssuerVelocityStore } from './androidKey/issuerVelocity.js';
import type { ReceiptVerifier } from './apple/verifyReceipt.js';
import type { DetailsSchema } from './detailsSchema.js';
import type { HintRun } from './hintRun.js';
import type {
  AllowlistReader,
  AndroidKeyStore,
  AppleKeyStore,
  DeviceVelocityStore,
  IntegrityTokenDecoder,
  KeyMode,
  PlatformVerifier,
  RevocationList,
} from './ports.js';

/** The allowlist entries a kind's policy lives in: an App Attest app, or an Android package. */
export type KindEntry = 'apple' | 'android';

/** What the platform table is built from; each kind takes the ports it needs. */
export interface KindPorts {
  /** already the mode's view (a live key's allowlist has no test-only Play Integrity pairs) */
  allowlist: AllowlistReader;
  appleKeys: AppleKeyStore;
  appleRoots: readonly X509Certificate[];
  mode: KeyMode;
  /** Google's decodeIntegrityToken (standard requests); without it they are a fault */
  googleDecoder?: IntegrityTokenDecoder;
  /** checks App Attest receipts (default: against the built-in Apple Root CA - G3) */
  receipts?: ReceiptVerifier;
  /** Android key attestation; without it `android-key` tokens are `service_unsupported` */
  android?: AndroidKeyDeps;
  /** per-device verify counts, shared by every instance (kinds that name a device key) */
  velocity?: DeviceVelocityStore;
}

/** What the Android key attestation verifier needs besides the allowlist. */
export interface AndroidKeyDeps {
  keys: AndroidKeyStore;
  /** root keys: `defaultAndroidRoots()`, or ATTEST_ANDROID_ROOT_CA's; test keys add the development CA */
  roots: readonly AndroidRootKey[];
  revocations: () => RevocationList | Promise<RevocationList>;
  /** new keys per issuing certificate (`--max-keys-per-issuer`), shared by every instance */
  issuers?: IssuerVelocityStore;
  /** the deployment's blocked issuing-certificate serials */
  blockedIssuers?: () => ReadonlySet<string> | Promise<ReadonlySet<string>>;
}

/**
 * One evidence kind. `D` is its details type (what the verify answer's `detailsField` holds);
 * the other parameters are the literal names the descriptor declares, so the unions derived from
 * the list (Service, PlatformDetails, CheckId, RejectReason) stay compile-checked.
 */
export interface Kind<
  S extends string,
  F extends string,
  D,
  C extends string,
  R extends string,
  O extends string,
  K extends boolean = boolean,
> {
  /** the `device.service` name (and the HTTP, log and metrics `service`) */
  readonly service: S;
  /** other names an operator may type for it (`attest logs --service android`) */
  readonly aliases: readonly string[];
  /** the allowlist entry whose policy it verifies against */
  readonly entry: KindEntry;
  /** the verify answer's field for its details */
  readonly detailsField: F;
  readonly detailsSchema: DetailsSchema;
  /** its checks, each with what passing it means (verify-file prints these; docs/checks.md) */
  readonly checkTitles: Readonly<Record<C, string>>;
  /** its own rejection reasons */
  readonly reasons: readonly R[];
  /** the reasons an entry may observe (recorded, not rejected); policy rules only */
  readonly observable: readonly O[];
  /** the details field a result token's `sub` is */
  readonly subject: keyof D & string;
  /** whether its tokens name a registered device key (per-device counts, `attest devices`) */
  readonly deviceKey: K;
  /** verify-file hints for its rejections */
  readonly hints?: (run: HintRun) => Promise<void>;
  /** its verifier over the ports, or undefined when the ports lack what it needs */
  readonly verifier: (ports: KindPorts) => PlatformVerifier | undefined;
  /** never set: carries `D` */
  readonly details?: D;
}

/** Any kind, for code that reads descriptors without their literal types. */
export type AnyKind = Kind<string, string, unknown, string, string, string>;

/**
 * Declares a kind with `D` as its details type and its names kept literal:
 * `defineKind<AppleTokenDetails>()({ service: 'apple', ... })`.
 */
export function defineKind<D>() {
  return <
    const S extends string,
    const F extends string,
    const C extends string,
    const R extends string,
    const O extends string,
    const K extends boolean,
  >(
    kind: Kind<S, F, D, C, R, O, K>,
  ): Kind<S, F, D, C, R, O, K> => kind;
}
