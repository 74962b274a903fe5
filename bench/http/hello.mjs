// The yardstick: a Hono hello-world that parses a JSON body and answers JSON, on loopback.
import { serve } from '@hono/node-server';
import { Hono } from 'hono';

const app = new Hono();
app.post('/hello', async (c) => c.json(await c.req.json()));
const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) => {
  process.stderr.write(`hello listening on http://127.0.0.1:${info.port}\n`);
});
process.once('SIGTERM', () => server.close(() => process.exit(0)));
