import { copyFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Context } from 'hono';

/**
 * Where the build puts swagger-ui's files (dist/server/api-docs): the package ships them, so
 * swagger-ui-dist is only a devDependency (its own dependency runs an install script that
 * would make every install warn).
 */
const SHIPPED = fileURLToPath(new URL('./api-docs/', import.meta.url));

/** swagger-ui-dist's files the page uses, with their types: served from the installed package, never a CDN. */
const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
};

// the page's own start-up script, a file rather than inline so the CSP allows scripts from 'self' only
const INIT_SCRIPT = `window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({ url: 'openapi.json', dom_id: '#api', deepLinking: true, tryItOutEnabled: false });
});
`;

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>attest HTTP API</title>
<link rel="icon" type="image/png" href="docs/favicon-32x32.png">
<link rel="stylesheet" href="docs/swagger-ui.css">
</head>
<body>
<div id="api"></div>
<script src="docs/swagger-ui-bundle.js"></script>
<script src="docs/init.js"></script>
</body>
</html>
`;

// appliances run in closed networks: everything the page loads comes from this service
const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; font-src 'self' data:; frame-ancestors 'none'";

/**
 * The API reference page (`GET /docs`): swagger-ui, from the swagger-ui-dist package installed
 * beside the service, rendering `/openapi.json`. Files are read once, on first request.
 */
export function createApiDocs() {
  const cache = new Map<string, Buffer>();
  let folder: string | undefined;
  const asset = (name: string): Buffer => {
    let body = cache.get(name);
    if (!body) {
      folder ??= existsSync(join(SHIPPED, 'swagger-ui-bundle.js')) ? SHIPPED : installedSwaggerUi();
      body = readFileSync(join(folder, name));
      cache.set(name, body);
    }
    return body;
  };
  const headers = (type: string) => ({
    'Content-Type': type,
    'Content-Security-Policy': CSP,
    'X-Content-Type-Options': 'nosniff',
    'Cache-Control': 'public, max-age=3600',
  });
  return {
    page: (c: Context) => c.body(PAGE, 200, headers('text/html; charset=utf-8')),
    /** one of the page's files, or undefined (a 404 for the caller) */
    asset: (c: Context, name: string) => {
      if (name === 'init.js')
        return c.body(INIT_SCRIPT, 200, headers('text/javascript; charset=utf-8'));
      const type = Object.hasOwn(ASSETS, name) ? ASSETS[name] : undefined;
      if (!type) return undefined;
      return c.body(new Uint8Array(asset(name)), 200, headers(type));
    },
  };
}

/** swagger-ui-dist in node_modules (a checkout, tests from src/). */
function installedSwaggerUi(): string {
  return dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
}

/** Copies swagger-ui's files into dist/server/api-docs (run by `npm run build`), with its licence. */
export function copyApiDocsAssets(): string {
  const from = installedSwaggerUi();
  mkdirSync(SHIPPED, { recursive: true });
  for (const name of [
    ...Object.keys(ASSETS),
    'LICENSE',
    'NOTICE',
    'swagger-ui-bundle.js.LICENSE.txt',
  ])
    copyFileSync(join(from, name), join(SHIPPED, name));
  return SHIPPED;
}
