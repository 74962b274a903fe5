#!/usr/bin/env node
// Runs the compiled CLI (dist/, built by `npm run build` before packing or testing).
// React (the `attest logs` viewer) is several times slower in its development mode.
process.env.NODE_ENV ??= 'production';
const { main } = await import('../dist/cli/main.js');

process.exitCode = await main(process.argv);
// a failed command released what it opened; should a library still hold a handle, end anyway
if (process.exitCode !== 0) setTimeout(() => process.exit(), 1000).unref();
