ALTER TABLE "android_revocations" ADD COLUMN "last_refresh_error" text;--> statement-breakpoint
ALTER TABLE "android_revocations" ADD COLUMN "last_refresh_error_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "result_signing_keys" ADD COLUMN "mode" text DEFAULT 'live' NOT NULL;