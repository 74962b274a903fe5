/** Terminal-hostile payloads for the escaping tests of verify-file and logs. */

/** What a hostile token or log line carries: each would act on a terminal if printed raw. */
export const HOSTILE = {
  osc: 'a\u001b]0;pwned\u0007b', // sets the window title
  csi: 'a\u001b[2J\u001b[Hb', // clears the screen, cursor home
  fakeVerdict: 'a\r\nVALID (apple)\u001b[Kb', // a new line that looks like the verdict
  c1: 'a\u009b31mb\u0085', // 8-bit CSI and NEL
  bidi: 'a\u202egnp.exe\u202cb', // right-to-left override
  zeroWidth: 'a\u200b\u2066b\u2069\ufeff', // zero-width space, isolates, BOM
  separators: 'a\u2028b\u2029c',
  del: 'a\u007fb',
};

/** No character a terminal would act on or reorder by. */
export const INERT = /^[^\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]*$/u;
