import { customType } from 'drizzle-orm/pg-core';

/** bytea as Uint8Array on both drivers (postgres-js gives Buffer, a Uint8Array subclass). */
export const bytea = customType<{ data: Uint8Array; driverData: Uint8Array }>({
  dataType: () => 'bytea',
});
