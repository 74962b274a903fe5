/**
 * @hono/node-server's serve() replaces the global Request and Response with its own. Files of the
 * shared project run in one module graph per worker, so a file that starts a server would hand
 * those classes to every later file; each file starts with the originals instead.
 */
const KEY = Symbol.for('attest.test.pristineGlobals');
type Pristine = { Request: typeof Request; Response: typeof Response };
const store = globalThis as unknown as Record<symbol, Pristine | undefined>;
const pristine = (store[KEY] ??= { Request: globalThis.Request, Response: globalThis.Response });
globalThis.Request = pristine.Request;
globalThis.Response = pristine.Response;
