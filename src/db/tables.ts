/**
 * Every table of the drizzle schema, as one object for drizzle's client (db/client.ts). The tables
 * are defined in schema.ts and the *Schema.ts modules beside it; drizzle-kit reads the same files
 * (drizzle.config.ts), and test/db/schemaModules.test.ts checks that this list names them all.
 */
import * as auditSchema from './auditSchema.js';
import * as captureSchema from './captureSchema.js';
import * as changeFeedSchema from './changeFeedSchema.js';
import * as deviceStatsSchema from './deviceStatsSchema.js';
import * as deviceVelocitySchema from './deviceVelocitySchema.js';
import * as keyboxDefenceSchema from './keyboxDefenceSchema.js';
import * as schema from './schema.js';

export const tables = {
  ...schema,
  ...auditSchema,
  ...captureSchema,
  ...changeFeedSchema,
  ...deviceStatsSchema,
  ...deviceVelocitySchema,
  ...keyboxDefenceSchema,
};
