import type { Config } from '../config.js';

/**
 * The messages between a cluster's primary and its workers (`serve --workers`), over node:cluster's
 * IPC channel. Every message carries `attest` (its kind) so that prom-client's or Node's own
 * messages on the same channel are told apart.
 */
export type ToWorker =
  /** what to serve: the configuration the primary read, and the database URL it opened */
  | {
      attest: 'start';
      config: Config;
      databaseUrl: string;
      propagationMs: number;
      /** listen with SO_REUSEPORT on config.port (the primary reserved it when 0 was asked) */
      reusePort: boolean;
    }
  /** the log file was rotated (SIGHUP to the primary): write to the new one */
  | { attest: 'reopen' }
  /** a change was made: drop the caches; `id` asks for a `reloaded` answer once done */
  | { attest: 'reload'; table?: string; id?: number }
  /** this worker's metrics, as prom-client's JSON */
  | { attest: 'metrics'; id: number }
  /** the answer to a `scrape`: every process's metrics summed, as Prometheus text */
  | { attest: 'scraped'; id: number; text: string | null }
  /** drain (answer what is in flight), hand over the last counts, close and exit */
  | { attest: 'stop' };

export type FromWorker =
  /** its listener is in place: it can be told what to serve */
  | { attest: 'ready' }
  | { attest: 'listening'; url: string; port: number }
  | { attest: 'reloaded'; id: number }
  | { attest: 'metrics'; id: number; metrics: unknown[] }
  /** GET /metrics reached this worker: it asks the primary for every process's sum */
  | { attest: 'scrape'; id: number }
  /** it is about to die of this (an unhandled error, a start that failed) */
  | { attest: 'fatal'; cause: string }
  /** drained and closed: everything it had to hand over came before this */
  | { attest: 'stopped' };

/** Whether an IPC message is one of attest's own. */
export function isAttestMessage(message: unknown): message is { attest: string } {
  return typeof message === 'object' && message !== null && 'attest' in message;
}
