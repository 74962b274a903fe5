import { copyApiDocsAssets } from './apiDocs.js';

// `npm run build`: the API reference page's files into dist/, so the package serves them itself
process.stdout.write(`API reference assets: ${copyApiDocsAssets()}\n`);
