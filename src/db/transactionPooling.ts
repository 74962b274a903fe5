import type { Sql, TransactionSql } from 'postgres';

/**
 * postgres.js options for a pool behind a pooler in transaction mode (PgBouncer's default for
 * managed fleets): no named prepared statements, since one prepared on a server connection is
 * unknown to the next; one statement in flight per connection (`max_pipeline` 0, an option of
 * postgres.js its types omit), since PgBouncer before 1.21 hands the server connection on at the
 * first ReadyForQuery and drops the answer to a pipelined second statement (its caller waits
 * forever; seen with Debian's 1.18: "got packet '1' from server when not linked").
 */
export const TRANSACTION_POOLED_OPTIONS = { prepare: false, max_pipeline: 0 } as const;

/**
 * `sql.begin` on a reserved connection. postgres.js's own `begin` learns its connection from a
 * callback that `max_pipeline: 0` skips, and then runs the transaction's statements nowhere; a
 * reserved connection takes them one after the other. No savepoints: attest nests no transaction.
 */
export function reservedBegin(client: Sql): Sql['begin'] {
  return (async (...args: unknown[]) => {
    const fn = args[args.length - 1] as (tx: TransactionSql) => unknown;
    const mode = args.length > 1 ? String(args[0]).replace(/[^a-z ]/gi, '') : '';
    const reserved = await client.reserve();
    try {
      await reserved.unsafe(`begin ${mode}`);
      let result: unknown;
      try {
        const made = fn(reserved as unknown as TransactionSql);
        result = await (Array.isArray(made) ? Promise.all(made) : made);
      } catch (err) {
        await reserved.unsafe('rollback').catch(() => {});
        throw err;
      }
      await reserved.unsafe('commit');
      return result;
    } finally {
      reserved.release();
    }
  }) as Sql['begin'];
}
