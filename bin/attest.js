#!/usr/bin/env node
// Runs the compiled CLI (npm install builds it through the `prepare` script).
// React (the `attest logs` viewer) is several times slower in its development mode.
process.env.NODE_ENV ??= 'production';
const { main } = await import('../dist/cli/main.js');

process.exitCode = await main(process.argv);
