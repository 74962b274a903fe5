import { defineConfig } from 'drizzle-kit';

export default defineConfig({
  dialect: 'postgresql',
  // schema.ts and the *Schema.ts modules beside it (src/db/tables.ts gathers the same for the client)
  schema: ['./src/db/schema.ts', './src/db/*Schema.ts'],
  out: './drizzle',
});
