/**
 * The evidence kinds, one line each: every list of kinds in core (the services, the verify
 * answer's details, check titles, reasons and observable ones, hints, result-token subjects,
 * the platform table) derives from this one. A new kind is a folder with its descriptor
 * (src/core/kind.ts) and a line here.
 */
import { androidKeyKind } from './androidKey/androidKeyKind.js';
import { appleKind } from './apple/appleKind.js';
import { gmsKind } from './gms/gmsKind.js';
import { gmsPcKind } from './gmsPc/gmsPcKind.js';
import type { AnyKind, Kind } from './kind.js';

/** In the order the services are listed (`SERVICES`, messages, the OpenAPI document). */
export const KINDS = [appleKind, gmsKind, androidKeyKind, gmsPcKind] as const;

type Kinds = typeof KINDS;
type OneKind = Kinds[number];

type DetailsOf<K> =
  K extends Kind<infer S, infer F, infer D, string, string, string>
    ? { service: S } & { [P in F]: D }
    : never;

/** What an accepted token's verifier returns: its service, and its details under its field. */
export type PlatformDetails = DetailsOf<OneKind>;

type ChecksOf<K> = K extends { checkTitles: infer T } ? keyof T & string : never;
type ReasonsOf<K> = K extends { reasons: readonly (infer R)[] } ? R : never;
type ObservablesOf<K> = K extends { observable: readonly (infer O)[] } ? O : never;

/** The check ids of every kind. */
export type KindCheckId = ChecksOf<OneKind>;

/** The rejection reasons of every kind (their own: shared ones are in reasons.ts). */
export type KindReason = ReasonsOf<OneKind>;

/** The observable reasons of every kind. */
export type KindObservableReason = ObservablesOf<OneKind>;

/** The descriptor of a service. */
export function kindOf(service: string): AnyKind | undefined {
  return (KINDS as readonly AnyKind[]).find((k) => k.service === service);
}
