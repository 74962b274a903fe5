#!/usr/bin/env node
// Runs the compiled CLI (dist/, built by `npm run build` before packing or testing).
import { readFileSync } from 'node:fs';

const args = process.argv.slice(2);
if (args.length === 1 && (args[0] === '--version' || args[0] === '-V')) {
  // what commander prints for it, without loading the CLI (a script asks this often)
  const manifest = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
  process.stdout.write(`${manifest.version}\n`);
} else {
  // React (the `attest logs` viewer) is several times slower in its development mode.
  process.env.NODE_ENV ??= 'production';
  const { main } = await import('../dist/cli/main.js');

  process.exitCode = await main(process.argv);
  // a failed command released what it opened; should a library still hold a handle, end anyway
  if (process.exitCode !== 0) setTimeout(() => process.exit(), 1000).unref();
}
