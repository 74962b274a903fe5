/**
 * Text for a terminal. Strings from a token or a log file are hostile: an ESC sequence can set
 * the window title, clear the screen or draw a fake verdict, and a bidi override (U+202E) can
 * make text read backwards. Every text and TUI path prints such strings through `safeText`;
 * `--json` output needs nothing (JSON.stringify escapes control characters itself).
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
