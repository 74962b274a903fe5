/**
 * Text for a terminal. Strings from a token or a log file are hostile: an ESC sequence can set
 * the window title, clear the screen or draw a fake verdict, and a bidi override (U+202E) can
 * make text read backwards. Every text and TUI path prints such strings through `safeText`;
 * `--json` output goes through `jsonSafe`: JSON.stringify escapes only C0 and lone surrogates, so
 * C1, bidi and other format characters and U+2028/U+2029 are escaped as `\uXXXX` on top.
 */

/** C0, DEL, C1 (Cc), format characters such as bidi overrides and zero-width marks (Cf), line and paragraph separators, lone surrogates. */
const UNSAFE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/gu;
const NAMED: Readonly<Record<string, string>> = { '\t': '\\t', '\n': '\\n', '\r': '\\r' };

function visible(c: string): string {
  const named = NAMED[c];
  if (named !== undefined) return named;
  const code = c.codePointAt(0)!;
  return code <= 0xff
    ? `\\x${code.toString(16).toUpperCase().padStart(2, '0')}`
    : `<U+${code.toString(16).toUpperCase().padStart(4, '0')}>`;
}

/**
 * The text with every control, format and separator character shown as a visible escape
 * (`\x1B`, `\n`, `<U+202E>`), so it stays one inert line whatever it contains.
 * @param text - text that came from a token or a log file
 */
export function safeText(text: string): string {
  return text.replace(UNSAFE, visible);
}

/** What JSON.stringify leaves raw that a terminal or a log shipper must not receive: DEL, C1, format characters (bidi, zero-width), line and paragraph separators. */
const JSON_UNSAFE = /[\u007f-\u009f\p{Cf}\u2028\u2029]/gu;

/**
 * JSON text with every C1, format and separator character escaped as `\uXXXX` (a pair of
 * escapes beyond the BMP). JSON keeps such characters only inside strings, where the escape means
 * the same character, so the document parses to the same value.
 * @param json - output of JSON.stringify, or an NDJSON line as a file holds it
 */
export function jsonSafe(json: string): string {
  return json.replace(JSON_UNSAFE, (c) =>
    Array.from(
      { length: c.length },
      (_, i) => `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`,
    ).join(''),
  );
}

/** SGR colours for verdicts; identity functions when colour is off. */
export interface Paint {
  readonly green: (s: string) => string;
  readonly red: (s: string) => string;
  readonly yellow: (s: string) => string;
  readonly dim: (s: string) => string;
  readonly bold: (s: string) => string;
}

const sgr = (open: number, close: number) => (s: string) => `\u001b[${open}m${s}\u001b[${close}m`;
const plain = (s: string) => s;

/**
 * Colours, or none.
 * @param enabled - stdout is a terminal and NO_COLOR is not set (see `colorWanted` in config.ts)
 */
export function paint(enabled: boolean): Paint {
  if (!enabled) return { green: plain, red: plain, yellow: plain, dim: plain, bold: plain };
  return {
    green: sgr(32, 39),
    red: sgr(31, 39),
    yellow: sgr(33, 39),
    dim: sgr(2, 22),
    bold: sgr(1, 22),
  };
}
