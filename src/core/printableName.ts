/**
 * A name an operator gives (an actor, an API key's name): 1 to 100 printable characters, with no
 * control, format (bidi, zero-width) or separator character, since it is printed in tables and logs.
 */
export const PRINTABLE_NAME = /^[^\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]{1,100}$/u;
/** How a name that is not PRINTABLE_NAME is refused. */
export const PRINTABLE_NAME_RULE =
  'must be 1 to 100 printable characters (no control, format, bidi or line separator characters)';
