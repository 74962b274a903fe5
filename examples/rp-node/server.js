// @ts-check
/**
 * Runs the example RP: `node examples/rp-node/server.js`. Its configuration, from the environment:
 * ATTEST_URL, ATTEST_API_KEY, RP_APPLE_APP_IDS and RP_ANDROID_PACKAGES (comma-separated), RP_PORT.
 */
import { serve } from '@hono/node-server';
import { createRpApp } from './app.js';

/** @param {string} name */
function required(name) {
  const value = process.env[name];
  if (!value) {
    console.error(`rp-node: ${name} is not set`);
    process.exit(2);
  }
  return value;
}
/** @param {string} name */
const list = (name) =>
  (process.env[name] ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

const app = createRpApp({
  attest: { baseUrl: required('ATTEST_URL'), apiKey: required('ATTEST_API_KEY'), timeoutMs: 5_000 },
  appleAppIds: list('RP_APPLE_APP_IDS'),
  androidPackages: list('RP_ANDROID_PACKAGES'),
  log: (line) => console.error(JSON.stringify(line)),
});
serve({ fetch: app.fetch, port: Number(process.env.RP_PORT ?? 3000) }, (info) =>
  console.error(`rp-node listening on http://localhost:${info.port}`),
);
