import { isObserved, isRejection, type LogEntry } from './logRecord.js';

/**
 * What the user narrowed the log to. The same filter drives the viewer (where keys change it)
 * and the plain printer (where the command-line flags set it).
 */
export interface LogFilter {
  /** Only verifications the service rejected (`isValid: false`). */
  readonly rejectionsOnly: boolean;
  /** Only valid verifications that failed an observed rule (`observed: [codes]`). */
  readonly observedOnly?: boolean;
  /** Only this reason code. */
  readonly reason?: string;
  /** Only this platform (`apple` | `gms`). */
  readonly service?: string;
  /** Only requests made with this API key id. */
  readonly apiKeyId?: string;
  /** Case-insensitive text that must occur in the line as written; '' matches everything. */
  readonly search: string;
  /** Only lines timed at or after this instant (epoch ms). */
  readonly since?: number;
  /** Only lines timed at or before this instant (epoch ms). */
  readonly until?: number;
  /** Only responses with a status in this range (`403`: 403 to 403, `4xx`: 400 to 499). */
  readonly status?: { readonly min: number; readonly max: number };
}

/** The filter that lets every line through. */
export const NO_FILTER: LogFilter = { rejectionsOnly: false, search: '' };

/** True when the filter narrows anything. */
export const isFiltering = (f: LogFilter): boolean =>
  f.rejectionsOnly ||
  f.observedOnly === true ||
  f.reason !== undefined ||
  f.service !== undefined ||
  f.apiKeyId !== undefined ||
  f.since !== undefined ||
  f.until !== undefined ||
  f.status !== undefined ||
  f.search !== '';

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * Compiles a filter into a predicate, once per filter change rather than once per line.
 * Lines that are not JSON only pass a filter that has nothing but a search (they have no fields).
 * @param filter - the filter to apply
 */
export function compileFilter(filter: LogFilter): (entry: LogEntry) => boolean {
  // A case-insensitive regex tests the raw line without allocating a lower-cased copy of it.
  const search = filter.search === '' ? undefined : new RegExp(escapeRegExp(filter.search), 'i');
  const needsRecord =
    filter.rejectionsOnly ||
    filter.observedOnly === true ||
    filter.reason !== undefined ||
    filter.service !== undefined ||
    filter.apiKeyId !== undefined ||
    filter.since !== undefined ||
    filter.until !== undefined ||
    filter.status !== undefined;
  return (entry) => {
    const r = entry.record;
    if (needsRecord) {
      if (r === undefined) return false;
      if (filter.rejectionsOnly && !isRejection(r)) return false;
      if (filter.observedOnly === true && !isObserved(r)) return false;
      if (filter.reason !== undefined && r.reason !== filter.reason) return false;
      if (filter.service !== undefined && r.service !== filter.service) return false;
      if (filter.apiKeyId !== undefined && r.apiKeyId !== filter.apiKeyId) return false;
      if (filter.since !== undefined && !(r.timeMs !== undefined && r.timeMs >= filter.since))
        return false;
      if (filter.until !== undefined && !(r.timeMs !== undefined && r.timeMs <= filter.until))
        return false;
      if (
        filter.status !== undefined &&
        !(r.status !== undefined && r.status >= filter.status.min && r.status <= filter.status.max)
      )
        return false;
    }
    return search === undefined || search.test(entry.raw);
  };
}
