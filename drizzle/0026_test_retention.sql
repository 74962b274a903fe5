CREATE INDEX "android_keys_test_created_at_idx" ON "android_keys" USING btree ("created_at") WHERE mode = 'test';--> statement-breakpoint
CREATE INDEX "apple_keys_test_created_at_idx" ON "apple_keys" USING btree ("created_at") WHERE mode = 'test';--> statement-breakpoint
CREATE INDEX "device_velocity_test_last_at_idx" ON "device_velocity" USING btree ("last_at") WHERE mode = 'test';