/**
 * The attestation services, by the names the token's `device.service`, the HTTP contract's
 * `service`, the log field `service` and the metrics label `service` all use (docs/token-format.md
 * section 3).
 */
import { KINDS } from './kinds.js';

type Kinds = typeof KINDS;
export type Service = Kinds[number]['service'];

/** Each kind's service, in the kinds' order (a tuple, as zod's enum takes it). */
export const SERVICES = KINDS.map((k) => k.service) as unknown as ServicesOf<Kinds>;
type ServicesOf<T extends readonly { service: string }[]> = {
  readonly [I in keyof T]: T[I]['service'];
};

/** The services whose tokens name a registered device key (per-device counts, `attest devices`). */
export type DeviceKeyService = Extract<Kinds[number], { deviceKey: true }>['service'];
export const DEVICE_KEY_SERVICES = KINDS.filter((k) => k.deviceKey).map((k) => k.service) as [
  DeviceKeyService,
  ...DeviceKeyService[],
];

/** The other names an operator may type for a service (`attest logs --service android`). */
const SERVICE_ALIASES: Readonly<Record<string, Service>> = Object.fromEntries(
  KINDS.flatMap((k) => k.aliases.map((alias) => [alias, k.service])),
);

/** Whether `value` is a canonical service name. */
export function isService(value: unknown): value is Service {
  return typeof value === 'string' && (SERVICES as readonly string[]).includes(value);
}

/**
 * The service an operator's name means: a canonical name or one of its aliases.
 * @returns the canonical name, or undefined for a name that means none
 */
export function serviceNamed(name: string): Service | undefined {
  if (isService(name)) return name;
  return Object.hasOwn(SERVICE_ALIASES, name) ? SERVICE_ALIASES[name] : undefined;
}

/** The accepted names for messages, e.g. `apple, or gms (android, google)`. */
export function acceptedServiceNames(): string {
  return SERVICES.map((s) => {
    const aliases = Object.keys(SERVICE_ALIASES).filter((a) => SERVICE_ALIASES[a] === s);
    return aliases.length ? `${s} (${aliases.join(', ')})` : s;
  }).join(', or ');
}
