import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';

/**
 * The audit trail's hash chain (docs/audit.md). The database chains each event as it is inserted
 * (migration 0021's trigger); this module recomputes the chain from the events as stored, so a
 * row edited, deleted or moved by someone with write access to the table is found.
 */

/** The first event's `prevHash`: the chain's stated starting point. */
export const GENESIS_HASH = '0'.repeat(64);

/** An audit event as the chain covers it. */
export interface ChainedEvent {
  /** the event's place: 1, 2, 3... with no gap */
  seq: number;
  /** the database clock at the change, UTC with microseconds: `2026-11-28T16:22:29.123456Z` */
  at: string;
  actor: string;
  action: string;
  target: string;
  before: unknown;
  after: unknown;
  /** the hash of the event before it (GENESIS_HASH for the first) */
  prevHash: string;
  /** this event's hash, as stored */
  hash: string;
}

/** The last event checked: where the next one must link to. */
export interface ChainPoint {
  seq: number;
  hash: string;
}

export const CHAIN_START: ChainPoint = { seq: 0, hash: GENESIS_HASH };

/** The first broken link: the event's place and what differs. */
export interface ChainBreak {
  seq: number;
  problem: string;
}

/**
 * SHA-256 (hex) of the event's RFC 8785 encoding: the object of its fields but `hash`. The
 * database computes the same (attest_audit_hash) when it inserts the event.
 */
export function eventHash(event: Omit<ChainedEvent, 'hash'>): string {
  const { seq, at, actor, action, target, before, after, prevHash } = event;
  const canonical = canonicalize({ seq, at, actor, action, target, before, after, prevHash });
  return createHash('sha256').update(canonical!, 'utf8').digest('hex');
}

/**
 * Checks that `event` is the one that follows `previous`: its place, its link, and its content.
 * @returns the break, or null when the link holds
 */
export function checkLink(previous: ChainPoint, event: ChainedEvent): ChainBreak | null {
  const expected = previous.seq + 1;
  if (event.seq !== expected)
    return {
      seq: expected,
      problem:
        event.seq > expected
          ? `event ${expected} is missing (deleted): the event after ${previous.seq} is ${event.seq}`
          : `event ${event.seq} comes after event ${previous.seq} (moved)`,
    };
  if (event.prevHash !== previous.hash)
    return {
      seq: event.seq,
      problem:
        `its prevHash ${short(event.prevHash)} is not the hash of event ${previous.seq} ` +
        `(${short(previous.hash)}): an event before it was edited, replaced, deleted or moved`,
    };
  const recomputed = eventHash(event);
  if (recomputed !== event.hash)
    return {
      seq: event.seq,
      problem: `it was edited: its content hashes to ${short(recomputed)}, its stored hash is ${short(event.hash)}`,
    };
  return null;
}

/**
 * Checks the chain's recorded head against the last event read: a head beyond it means events
 * at the end were deleted.
 */
export function checkHead(last: ChainPoint, head: ChainPoint): ChainBreak | null {
  if (head.seq === last.seq && head.hash === last.hash) return null;
  if (head.seq > last.seq)
    return {
      seq: last.seq + 1,
      problem: `the chain's head is event ${head.seq}, but the last event is ${last.seq}: the events after it were deleted`,
    };
  return {
    seq: last.seq,
    problem: `the chain's head (event ${head.seq}, ${short(head.hash)}) does not match the last event (${last.seq}, ${short(last.hash)}): the head or the last event was changed`,
  };
}

/** Parses an anchor written down from `attest audit head`: `SEQ:HASH`. */
export function parseAnchor(text: string): ChainPoint | null {
  const match = /^([1-9][0-9]{0,15}):([0-9a-f]{64})$/.exec(text.trim());
  return match ? { seq: Number(match[1]), hash: match[2]! } : null;
}

function short(hash: string): string {
  return hash.length > 16 ? `${hash.slice(0, 16)}…` : hash;
}
