/**
 * The attestation services, by the names the token's `device.service`, the HTTP contract's
 * `service`, the log field `service` and the metrics label `service` all use (docs/token-format.md
 * section 3).
 */
export const SERVICES = ['apple', 'gms', 'android-key', 'gms-pc'] as const;
export type Service = (typeof SERVICES)[number];

/** The other names an operator may type for a service (`attest logs --service android`). */
const SERVICE_ALIASES: Readonly<Record<string, Service>> = { android: 'gms', google: 'gms' };

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
