/** No embedded PostgreSQL for this platform, or it cannot run here; the message says what to do. */
export class EmbeddedEngineError extends Error {
  override readonly name = 'EmbeddedEngineError';
}
