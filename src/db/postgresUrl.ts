/**
 * A postgres:// URL as postgres.js takes it. libpq names a Unix socket's folder in the query
 * (`postgres://user:pw@/db?host=/path/to/dir`, the form psql and every libpq tool read); postgres.js
 * reads no `host` parameter (it would send it to the server as a setting), so it is moved to the
 * `host` option here. Every postgres.js client of a URL is made through this.
 */
export function postgresTarget(url: string): { url: string; host?: string } {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { url };
  }
  const host = parsed.searchParams.get('host');
  if (!host?.startsWith('/')) return { url };
  parsed.searchParams.delete('host');
  return { url: parsed.toString(), host };
}
