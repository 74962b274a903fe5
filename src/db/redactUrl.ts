/** A URL without its password, for messages and logs (a URL naming several hosts included). */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    // several hosts (h1:5432,h2:5432) are not a WHATWG URL: the password is cut out by hand
    const m = /^(postgres(?:ql)?:\/\/)([^/?#]*)(.*)$/.exec(url);
    if (!m) return 'postgres://(unparseable URL)';
    const authority = m[2]!;
    const at = authority.lastIndexOf('@');
    if (at < 0) return url;
    const user = authority.slice(0, at);
    const colon = user.indexOf(':');
    return colon < 0 ? url : `${m[1]}${user.slice(0, colon)}:***${authority.slice(at)}${m[3]}`;
  }
}
