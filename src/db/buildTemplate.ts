/** `npm run build` runs this after tsc: see template.ts. */
import { buildTemplate } from './template.js';

process.stdout.write(`embedded database template: ${await buildTemplate()}\n`);
