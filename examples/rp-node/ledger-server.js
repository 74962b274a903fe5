// @ts-check
/**
 * Runs the example ledger: `node examples/rp-node/ledger-server.js`. From the environment:
 * ATTEST_ISSUER, LEDGER_AUDIENCE (the RP's API key id), ATTEST_JWKS_URL (optional), LEDGER_PORT,
 * and LEDGER_ACCEPT_TEST_TOKENS=on only in a test environment (test-mode keys' tokens).
 */
import { serve } from '@hono/node-server';
import { createLedgerApp } from './ledger.js';

/** @param {string} name */
function required(name) {
  const value = process.env[name];
  if (!value) {
    console.error(`ledger: ${name} is not set`);
    process.exit(2);
  }
  return value;
}

const app = createLedgerApp({
  issuer: required('ATTEST_ISSUER'),
  audience: required('LEDGER_AUDIENCE'),
  ...(process.env.ATTEST_JWKS_URL ? { jwksUrl: process.env.ATTEST_JWKS_URL } : {}),
  ...(process.env.LEDGER_ACCEPT_TEST_TOKENS === 'on' ? { acceptTestTokens: true } : {}),
  log: (line) => console.error(JSON.stringify(line)),
});
serve({ fetch: app.fetch, port: Number(process.env.LEDGER_PORT ?? 3001) }, (info) =>
  console.error(`ledger listening on http://localhost:${info.port}`),
);
