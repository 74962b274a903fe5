import { sql, type SQL } from 'drizzle-orm';
import type { ChainedEvent, ChainPoint } from '../core/auditChain.js';
import { rowsOf, type Database } from './database.js';

/** A before/after summary: plain JSON of public facts (fingerprints, names, policy), never a secret. */
export type AuditSummary = Record<string, unknown>;

/** One recorded administrative change. */
export interface AuditEvent {
  id: number;
  /** the database clock at the change */
  at: Date;
  actor: string;
  /** `keys.create`, `allowlist.remove`... (docs/audit.md lists them) */
  action: string;
  /** what changed: an API key id, `apple:APP_ID`, `android:PACKAGE`... */
  target: string;
  before: AuditSummary | null;
  after: AuditSummary | null;
  /** its place in the hash chain, and the chain's hashes (docs/audit.md) */
  seq: number;
  prevHash: string;
  hash: string;
}

/**
 * Who makes a change, and where each recorded event goes once it is committed (the CLI writes
 * one log line). Repositories given an auditor record the event in the statement of the change.
 */
export interface Auditor {
  actor: string;
  log(event: AuditEvent): void;
}

/** The change to record: `recordAudit` adds the actor and the time. */
export interface AuditChange {
  action: string;
  target: string;
  before?: AuditSummary | null;
  after?: AuditSummary | null;
}

/**
 * Records one event with `tx`, a transaction that also makes the change, so both commit or
 * neither does. The caller passes the result to `auditor.log` after the commit.
 * @param tx the transaction of the change
 * @param auditor who makes it
 * @param change action, target and summaries (no secrets)
 */
export async function recordAudit(
  tx: Database,
  auditor: Pick<Auditor, 'actor'>,
  change: AuditChange,
): Promise<AuditEvent> {
  const rows = rowsOf<{ audit: unknown }>(
    await tx.execute(sql`
      with audit as (
        insert into audit_events (actor, action, target, before, after)
        values (${auditor.actor}, ${change.action}, ${change.target}, ${json(change.before)}, ${json(change.after)})
        returning *
      ) select to_jsonb(audit) as audit from audit`),
  );
  return toAuditEvent(rows[0]!.audit)!;
}

/**
 * The CTE that records the event of a change in the same statement as the change:
 * `, audit as (insert into audit_events ... <select> returning *)`. `select` yields
 * (actor, action, target, before, after) from the change's own CTEs; no row, no event.
 * Empty without an auditor.
 */
export function auditCte(auditor: Auditor | undefined, select: (actor: string) => SQL): SQL {
  if (!auditor) return sql``;
  return sql`, audit as (insert into audit_events (actor, action, target, before, after) ${select(auditor.actor)} returning *)`;
}

/** The column that returns the recorded event (null without an auditor). */
export function auditColumn(auditor: Auditor | undefined): SQL {
  return auditor ? sql`(select to_jsonb(audit) from audit)` : sql`null::jsonb`;
}

/** Passes the event a statement returned to the auditor's log; returns it. */
export function logAudit(auditor: Auditor | undefined, value: unknown): AuditEvent | null {
  const event = toAuditEvent(value);
  if (event && auditor) auditor.log(event);
  return event;
}

/** Events in one page of `chain`: a page crosses the admin socket as one answer. */
export const AUDIT_PAGE = 500;

/** Reads the trail (it is never updated or deleted). */
export function createAuditRepository(db: Database) {
  return {
    /**
     * Events in the order they happened.
     * @param filter sinceSeconds: only the last so many seconds (database clock); action: an action, or its group (`keys` for `keys.*`)
     */
    async list(filter: { sinceSeconds?: number; action?: string } = {}): Promise<AuditEvent[]> {
      const conditions: SQL[] = [sql`true`];
      if (filter.sinceSeconds !== undefined)
        conditions.push(sql`at >= now() - make_interval(secs => ${filter.sinceSeconds})`);
      if (filter.action !== undefined)
        conditions.push(
          sql`(action = ${filter.action} or starts_with(action, ${`${filter.action}.`}))`,
        );
      const rows = rowsOf<{ audit: unknown }>(
        await db.execute(
          sql`select to_jsonb(e) as audit from audit_events e where ${sql.join(conditions, sql` and `)} order by e.id`,
        ),
      );
      return rows.map((r) => toAuditEvent(r.audit)!);
    },

    /**
     * Events with their chain fields, in chain order, after `afterSeq`: a page of the chain for
     * `audit verify` and `audit export`. `at` is the text the chain's hash covers.
     * @param filter afterSeq: the last place already read (0: from the start); limit: at most so
     *   many; sinceSeconds: only events of the last so many seconds (database clock)
     */
    async chain(filter: {
      afterSeq: number;
      limit: number;
      sinceSeconds?: number;
    }): Promise<ChainedEvent[]> {
      const since =
        filter.sinceSeconds === undefined
          ? sql``
          : sql` and at >= now() - make_interval(secs => ${filter.sinceSeconds})`;
      const rows = rowsOf<Record<string, unknown>>(
        await db.execute(sql`
          select seq, ${AT_TEXT} as at, actor, action, target, before::text as before, after::text as after, prev_hash, hash
          from audit_events where seq > ${filter.afterSeq}${since}
          order by seq limit ${filter.limit}`),
      );
      return rows.map((r) => ({
        seq: Number(r.seq),
        at: String(r.at),
        actor: String(r.actor),
        action: String(r.action),
        target: String(r.target),
        before: parsed(r.before),
        after: parsed(r.after),
        prevHash: String(r.prev_hash),
        hash: String(r.hash),
      }));
    },

    /** The chain's head as the database records it: the last event's place and hash (seq 0: no event yet). */
    async head(): Promise<ChainPoint> {
      const rows = rowsOf<{ seq: unknown; head: unknown }>(
        await db.execute(sql`select seq, head from audit_chain where id`),
      );
      const row = rows[0];
      if (!row) throw new Error('the audit chain has no head row (migration 0021 not applied?)');
      return { seq: Number(row.seq), hash: String(row.head) };
    },
  };
}

/** The event time as the chain's hash covers it (the same text as attest_audit_hash). */
const AT_TEXT = sql.raw(`to_char(at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`);

/** A jsonb column read as text (so both drivers hand over the same): parsed; SQL null is null. */
function parsed(value: unknown): unknown {
  return value === null || value === undefined ? null : (JSON.parse(String(value)) as unknown);
}

export type AuditRepository = ReturnType<typeof createAuditRepository>;

function json(value: AuditSummary | null | undefined): SQL {
  return value === undefined || value === null
    ? sql`null::jsonb`
    : sql`${JSON.stringify(value)}::jsonb`;
}

/** A `to_jsonb(audit_events row)`; drivers hand jsonb over parsed, or as text. */
function toAuditEvent(value: unknown): AuditEvent | null {
  if (value === null || value === undefined) return null;
  const r = (typeof value === 'string' ? JSON.parse(value) : value) as Record<string, unknown>;
  return {
    id: Number(r.id),
    at: new Date(String(r.at)),
    actor: String(r.actor),
    action: String(r.action),
    target: String(r.target),
    before: (r.before as AuditSummary | null) ?? null,
    after: (r.after as AuditSummary | null) ?? null,
    seq: Number(r.seq),
    prevHash: String(r.prev_hash),
    hash: String(r.hash),
  };
}
