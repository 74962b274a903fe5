/**
 * A postgres:// URL as postgres.js takes it. libpq names a Unix socket's folder in the query
 * (`postgres://user:pw@/db?host=/path/to/dir`, the form psql and every libpq tool read); postgres.js
 * reads no `host` parameter (it would send it to the server as a setting), so it is moved to the
 * `host` option here. Every postgres.js client of a URL is made through this, and spreads
 * `options` into its own.
 *
 * A URL may name several hosts (`postgres://u@h1:5432,h2:5432/db?target_session_attrs=read-write`,
 * as libpq reads it): each connection tries them in turn and keeps the first that fits. postgres.js
 * judges `read-write` by `default_transaction_read_only` alone, which a hot standby reports as
 * `off`: it would keep a standby, whose every write then fails (SQLSTATE 25006). So `read-write`
 * is given to it as `primary` (a server not in recovery), what a failover needs.
 */
export function postgresTarget(url: string): {
  url: string;
  host?: string;
  options: { host?: string; target_session_attrs?: 'primary' };
} {
  const attrs = targetSessionAttrs(url);
  const tsa = attrs === 'read-write' ? { target_session_attrs: 'primary' as const } : {};
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    // several hosts: not a WHATWG URL, and none of them a socket folder
    return { url, options: tsa };
  }
  const host = parsed.searchParams.get('host');
  if (!host?.startsWith('/')) return { url, options: tsa };
  parsed.searchParams.delete('host');
  return { url: parsed.toString(), host, options: { host, ...tsa } };
}

/** What libpq and postgres.js accept (`any`, libpq's default, is left out: postgres.js refuses it). */
const SESSION_ATTRS = new Set(['read-write', 'read-only', 'primary', 'standby', 'prefer-standby']);

/** The URL's target_session_attrs, or undefined. */
function targetSessionAttrs(url: string): string | undefined {
  const query = url.indexOf('?');
  if (query < 0) return undefined;
  return new URLSearchParams(url.slice(query + 1)).get('target_session_attrs') ?? undefined;
}

/** The `host:port` list of a URL's authority (after any user:password@). */
export function urlHosts(url: string): string[] {
  const rest = url.replace(/^postgres(ql)?:\/\//, '');
  const authority = rest.split(/[/?]/)[0] ?? '';
  const at = authority.lastIndexOf('@');
  return (at >= 0 ? authority.slice(at + 1) : authority).split(',');
}

/**
 * Why `url` cannot be used as DATABASE_URL, in words for one line (never repeating the URL: it
 * may hold a password), or undefined when it can. Checked at start, so a malformed multi-host URL
 * is a configuration error and not a connection that fails later in the driver.
 */
export function postgresUrlProblem(url: string): string | undefined {
  if (!/^postgres(ql)?:\/\//.test(url)) return 'must be a postgres:// or postgresql:// URL';
  const hosts = urlHosts(url);
  for (const entry of hosts) {
    // a host name, an IPv4 address or a bracketed IPv6 address, then an optional :port
    const m = /^(\[[0-9A-Fa-f:.]+\]|[^\s:[\]]*)(?::(\d*))?$/.exec(entry);
    if (!m) return `names a host that is not host or host:port ("${entry.slice(0, 60)}")`;
    if (hosts.length > 1 && m[1] === '')
      return 'names an empty host in its list of hosts (host1:port1,host2:port2)';
    const port = m[2];
    if (port !== undefined && !(Number(port) >= 1 && Number(port) <= 65535))
      return `names a port that is not from 1 to 65535 ("${entry.slice(0, 60)}")`;
  }
  const attrs = targetSessionAttrs(url);
  if (attrs !== undefined && !SESSION_ATTRS.has(attrs))
    return `has target_session_attrs "${attrs.slice(0, 30)}": use read-write (or primary, read-only, standby, prefer-standby)`;
  if (hosts.length > 1 && attrs !== 'read-write' && attrs !== 'primary')
    return 'names several hosts but not ?target_session_attrs=read-write: attest writes, and a standby refuses writes';
  return undefined;
}
