ALTER TABLE "android_keys" ADD COLUMN "extras" jsonb;--> statement-breakpoint
ALTER TABLE "apple_apps" ADD COLUMN "platforms" text[] DEFAULT '{}'::text[] NOT NULL;--> statement-breakpoint
ALTER TABLE "apple_keys" ADD COLUMN "platform" text DEFAULT 'iOS' NOT NULL;