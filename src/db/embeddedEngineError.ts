import { Fault } from '../core/fault.js';
/** No embedded PostgreSQL for this platform, or it cannot run here; the message says what to do. */
export class EmbeddedEngineError extends Fault {
  override readonly name = 'EmbeddedEngineError';
  constructor(message: string) {
    super('embedded_engine', message);
  }
}
