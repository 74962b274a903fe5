// `node --import ./test/support/recordModules.mjs ...`: appends every module URL the process
// resolves (ES imports, and the CommonJS packages they import) to the file named by
// ATTEST_RECORD_MODULES, one a line, so that a test can say which modules a command loaded.
import { register } from 'node:module';

register(
  `data:text/javascript,${encodeURIComponent(`
import { appendFileSync } from 'node:fs';
const file = process.env.ATTEST_RECORD_MODULES;
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  if (file) appendFileSync(file, result.url + '\\n');
  return result;
}`)}`,
);
